import TandemClient
import TandemCore
import TandemMQTT

/// ``TandemTransport`` for tandem-web's sessions: an ``MQTTClient`` on the process's
/// ``PollLoop``, whose messages and connection edges go straight from the loop's read
/// into the session's ``TandemClient``'s inbox (a ``DeliveringTransport``: the MQTT
/// client's `deliver` and `onEvent`), with no stream or waiting task in between. With
/// thousands of sessions each holding a dozen subscriptions, what every waiting task
/// keeps counts: a memory cost per session, not per message.
///
/// Like ``MosquittoTransport`` otherwise (QoS 1 publishes, the connection's edges on
/// ``events`` too) but for one thing: it subscribes at QoS 0. The session starts clean
/// every time it connects, so the broker never sends a QoS 1 message of it again after a
/// drop (the session is gone with the connection), and while the connection lives TCP
/// delivers either: QoS 1 only added an acknowledgement to write for every message the
/// session reads (a system call and the broker's handling of it, five for each drag
/// update in a room of five). What a reconnect misses comes back as it did: the retained
/// snapshots and lists, and the resends of what is pending. A subscription lasts until
/// the client shuts down (TandemClient never ends one sooner; it pauses a room's
/// snapshots while it follows the room's changes).
struct WebTransport: DeliveringTransport {
    let client: MQTTClient

    func connect() async throws { try await client.connect() }
    func disconnect() async { await client.disconnect() }
    var isConnected: Bool { client.isConnected }
    var lastProblem: String? { client.lastProblem }

    func publish(_ topic: String, payload: [UInt8], retain: Bool) async throws {
        try await client.publish(topic, payload: payload, qos: .atLeastOnce, retain: retain)
    }

    func enqueue(_ topic: String, payload: [UInt8], retain: Bool) throws {
        try client.enqueue(topic, payload: payload, qos: .atLeastOnce, retain: retain)
    }

    func enqueueAtMostOnce(_ topic: String, payload: [UInt8]) throws {
        try client.enqueue(topic, payload: payload, qos: .atMostOnce, retain: false)
    }

    func subscribe(_ filters: [String]) async throws -> AsyncThrowingStream<TransportMessage, any Error> {
        let (stream, continuation) = AsyncThrowingStream<TransportMessage, any Error>.makeStream()
        try await client.subscribe(filters, qos: .atMostOnce) { message in
            continuation.yield(TransportMessage(topic: message.topic, payload: message.payload, retained: message.retain))
        }
        return stream
    }

    var events: AsyncStream<TransportEvent> { MosquittoTransport.events(of: client) }

    /// What the session's client uses: the loop's messages and the connection's edges go
    /// straight into its inbox, with no task of the session waiting on a stream.
    func subscribe(_ filters: [String], deliver: @escaping @Sendable (TransportMessage) -> Void) async throws {
        try await client.subscribe(filters, qos: .atMostOnce) { message in
            deliver(TransportMessage(topic: message.topic, payload: message.payload, retained: message.retain))
        }
    }

    func followEvents(_ deliver: @escaping @Sendable (TransportEvent) -> Void) {
        MosquittoTransport.followEvents(of: client, deliver)
    }

    func pauseSubscription(_ filter: String) { client.pauseSubscription(filter) }
    func resumeSubscription(_ filter: String) { client.resumeSubscription(filter) }
}
