import TandemCore

/// A message the transport delivered: its topic and a copy of its bytes.
public struct TransportMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var retained: Bool

    public init(topic: String, payload: [UInt8], retained: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.retained = retained
    }
}

/// What happened to the connection.
public enum TransportEvent: Sendable, Equatable {
    /// Connected, every subscription acknowledged.
    case connected
    /// The connection dropped or an attempt failed; the transport keeps retrying.
    case disconnected(reason: String)
}

/// The small piece of MQTT that ``TandemClient`` needs. Linux uses
/// ``MosquittoTransport`` (libmosquitto); an Apple app plugs in its own (over
/// Network.framework or any MQTT v5 client), with nothing else of the library changing.
///
/// Every publish is QoS 1, but for room cursors (``enqueueAtMostOnce(_:payload:)``). A
/// transport must:
/// - set, before it connects, a retained will saying `{"online":false}` on the client's
///   presence topic (``TandemClient/presenceTopic``), so a crash is seen;
/// - keep reconnecting on its own after a drop, and report both edges on ``events``;
/// - deliver messages of every subscription made before `connect()`, retained ones included.
public protocol TandemTransport: Sendable {
    /// Connects; returns once connected and every subscription so far is acknowledged.
    /// Throws on refused credentials; retries network failures until cancelled.
    func connect() async throws
    /// Disconnects cleanly (so the will is not published).
    func disconnect() async
    var isConnected: Bool { get }
    /// Why the last connection attempt failed, for people; nil when nothing failed.
    var lastProblem: String? { get }
    /// Publishes at QoS 1 and returns once the broker has it.
    func publish(_ topic: String, payload: [UInt8], retain: Bool) async throws
    /// Hands a QoS 1 message over without waiting; throws when it cannot even be queued.
    func enqueue(_ topic: String, payload: [UInt8], retain: Bool) throws
    /// Hands a QoS 0 message over without waiting, not retained: what is lost is lost
    /// (room cursors, which the next position replaces). Throws when it cannot be sent
    /// now (not connected). A transport without QoS 0 may send it at QoS 1 (the default).
    func enqueueAtMostOnce(_ topic: String, payload: [UInt8]) throws
    /// Subscribes at QoS 1; the stream ends when the transport is closed.
    func subscribe(_ filters: [String]) async throws -> AsyncThrowingStream<TransportMessage, any Error>
    /// Connection edges, for as long as the transport lives.
    var events: AsyncStream<TransportEvent> { get }
}

extension TandemTransport {
    /// At QoS 1, for a transport that has no QoS 0 of its own.
    public func enqueueAtMostOnce(_ topic: String, payload: [UInt8]) throws {
        try enqueue(topic, payload: payload, retain: false)
    }
}

/// A transport that hands each message and connection edge to a closure as it comes,
/// on its own thread: ``TandemClient`` then queues them in one inbox, with no task
/// waiting on a stream per subscription (``Inbox``). ``MosquittoTransport`` and
/// tandem-web's are; any other transport is read through its streams, a task each.
package protocol DeliveringTransport: TandemTransport {
    /// Subscribes at the transport's QoS and calls `deliver` with every message, until the
    /// transport is closed. `deliver` returns at once.
    func subscribe(_ filters: [String], deliver: @escaping @Sendable (TransportMessage) -> Void) async throws
    /// Calls `deliver` with every edge of the connection from now on (as ``TandemTransport/events``).
    func followEvents(_ deliver: @escaping @Sendable (TransportEvent) -> Void)
    /// Stops `filter`'s messages for now; the subscription stays, and a reconnect or
    /// ``resumeSubscription(_:)`` brings the broker's retained message of it again. Does
    /// nothing without a connection. Calls leave in the order they are made.
    func pauseSubscription(_ filter: String)
    /// Subscribes `filter` (already subscribed, paused or not) again, without waiting:
    /// the broker sends its retained message. Does nothing without a connection.
    func resumeSubscription(_ filter: String)
}
