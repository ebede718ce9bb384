import Logging
import TandemCore
import TandemMQTT

/// ``TandemTransport`` over libmosquitto (TandemMQTT): the transport on Linux, and the one
/// the `tandem-agent` binary uses. It is the only file of TandemClient that knows MQTT's
/// client library; everything else speaks ``TandemTransport``.
public struct MosquittoTransport: TandemTransport, DeliveringTransport {
    public let client: MQTTClient
    /// What its subscriptions ask for: QoS 1, but for tandem-web's sessions
    /// (``init(_:subscribingAt:)``).
    let subscriptionQoS: MQTTQoS

    /// Wraps a client whose configuration already carries the presence will.
    public init(_ client: MQTTClient) {
        self.init(client, subscribingAt: .atLeastOnce)
    }

    /// The same, its subscriptions at `qos`. tandem-web's sessions subscribe at QoS 0:
    /// each starts clean every time it connects, so the broker never sends a QoS 1
    /// message of it again after a drop (the session is gone with the connection), and
    /// while the connection lives TCP delivers either; QoS 1 only added an
    /// acknowledgement to write for every message a session reads (a system call and the
    /// broker's handling of it, five for each drag update in a room of five). What a
    /// reconnect misses comes back as it does for any client: the retained snapshots and
    /// lists, and the resends of what is pending.
    package init(_ client: MQTTClient, subscribingAt qos: MQTTQoS) {
        self.client = client
        subscriptionQoS = qos
    }

    /// A client for `user` under `clientId`, with the retained offline will on its
    /// presence topic the contract asks for, and a clean session.
    ///
    /// - Parameters:
    ///   - tls: nil connects in clear; otherwise the broker's certificate and host name
    ///     are verified against its CA file.
    ///   - logger: where the MQTT client says what it does (reconnects, failures).
    public init(
        host: String, port: Int, username: String? = nil, password: String? = nil, tls: MQTTTLS? = nil,
        user: String, clientId: String, topics: Topics = Topics(), logger: Logger = Logger(label: "tandem.mqtt")
    ) throws {
        client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: host, port: port, clientId: clientId, username: username, password: password,
                will: MQTTWill(topic: topics.presence(user: user, clientId: clientId),
                               payload: TandemClient.offline, qos: .atLeastOnce, retain: true),
                session: .cleanStart, tls: tls),
            logger: logger)
        subscriptionQoS = .atLeastOnce
    }

    public func connect() async throws { try await client.connect() }
    public func disconnect() async { await client.disconnect() }
    public var isConnected: Bool { client.isConnected }
    public var lastProblem: String? { client.lastProblem }

    public func publish(_ topic: String, payload: [UInt8], retain: Bool) async throws {
        try await client.publish(topic, payload: payload, qos: .atLeastOnce, retain: retain)
    }

    public func enqueue(_ topic: String, payload: [UInt8], retain: Bool) throws {
        try client.enqueue(topic, payload: payload, qos: .atLeastOnce, retain: retain)
    }

    public func enqueueAtMostOnce(_ topic: String, payload: [UInt8]) throws {
        try client.enqueue(topic, payload: payload, qos: .atMostOnce, retain: false)
    }

    public func subscribe(_ filters: [String]) async throws -> AsyncThrowingStream<TransportMessage, any Error> {
        let messages = Messages(try await client.subscribe(filters, qos: subscriptionQoS).makeAsyncIterator())
        // Pulled by the stream's consumer itself: no task in between, so messages of
        // different subscriptions reach their consumers as close to the broker's order
        // as the consumers' own scheduling allows.
        return AsyncThrowingStream { try await messages.next() }
    }

    /// One subscription's messages, read by the one consumer of the stream made of it.
    /// `@unchecked Sendable`: `AsyncThrowingStream(unfolding:)` calls `next()` from
    /// that consumer only, one call at a time, so the iterator is never used at once
    /// from two places.
    private final class Messages: @unchecked Sendable {
        private var iterator: AsyncThrowingStream<MQTTMessage, any Error>.AsyncIterator

        init(_ iterator: AsyncThrowingStream<MQTTMessage, any Error>.AsyncIterator) {
            self.iterator = iterator
        }

        func next() async throws -> TransportMessage? {
            guard let m = try await iterator.next() else { return nil }
            return TransportMessage(topic: m.topic, payload: m.payload, retained: m.retain)
        }
    }

    /// The connection's events as ``TransportEvent``s, followed by a detached task: no
    /// task-local values to copy into it (a slab of memory per task, which counts with a
    /// client per signed-in person).
    public var events: AsyncStream<TransportEvent> {
        let source = client.events
        let (stream, continuation) = AsyncStream<TransportEvent>.makeStream()
        let task = Task.detached {
            for await event in source {
                switch event {
                case .connected: continuation.yield(.connected)
                case .disconnected(let reason): continuation.yield(.disconnected(reason: reason))
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    package func subscribe(_ filters: [String], deliver: @escaping @Sendable (TransportMessage) -> Void) async throws {
        try await client.subscribe(filters, qos: subscriptionQoS) { message in
            deliver(TransportMessage(topic: message.topic, payload: message.payload, retained: message.retain))
        }
    }

    /// The connection's events as ``TransportEvent``s, handed to `deliver` on the thread
    /// that sees them.
    package func followEvents(_ deliver: @escaping @Sendable (TransportEvent) -> Void) {
        client.onEvent { event in
            switch event {
            case .connected: deliver(.connected)
            case .disconnected(let reason): deliver(.disconnected(reason: reason))
            }
        }
    }

    package func pauseSubscription(_ filter: String) { client.pauseSubscription(filter) }
    package func resumeSubscription(_ filter: String) { client.resumeSubscription(filter) }
}
