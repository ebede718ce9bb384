import Logging
import Synchronization
import TandemCore
import TandemMQTT

/// One agent's connection: the MQTT client under a fresh client id, its presence
/// (retained online on connect, a retained offline will, offline again on a clean exit),
/// and at-least-once delivery of its events and commands (``ReliableSender``).
///
/// Use: `subscribe` everything first (retained and queued messages are never missed),
/// then `connect()`, then `run` the background work alongside the mode's own loop, and
/// `close()` at the end.
public final class AgentSession: Sendable {
    public let configuration: AgentConfiguration
    public let clientId: String
    public let client: MQTTClient
    public let console: Console
    public let sender: ReliableSender
    public let logger: Logger
    /// Set by `close()`, so its own disconnect is not reported as a lost connection.
    private let closing = Atomic<Bool>(false)

    public var topics: Topics { configuration.topics }
    public var user: String { configuration.user }

    private static let online = TandemClient.online
    private static let offline = TandemClient.offline

    public init(configuration: AgentConfiguration, console: Console, logger: Logger) throws {
        self.configuration = configuration
        self.console = console
        self.logger = logger
        // Client ids allow more than identifiers, but keeping to them keeps the presence
        // topic level readable.
        clientId = "agent-\(configuration.user.prefix(40))-\(IdentifierGenerator.randomHex(8))"
        let presence = configuration.topics.presence(user: configuration.user, clientId: clientId)
        client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: configuration.host,
                port: configuration.port,
                clientId: clientId,
                username: configuration.username,
                password: configuration.password,
                will: MQTTWill(topic: presence, payload: Self.offline, qos: .atLeastOnce, retain: true),
                session: .cleanStart,
                tls: configuration.tls
            ),
            logger: logger
        )
        sender = ReliableSender(transport: MosquittoTransport(client), logger: logger)
    }

    private var presenceTopic: String { topics.presence(user: user, clientId: clientId) }

    public func subscribe(_ filters: [String]) async throws -> MQTTSubscription {
        try await client.subscribe(filters, qos: .atLeastOnce)
    }

    /// Connects (retrying network failures; throwing on refused credentials) and says
    /// we are online.
    ///
    /// With a ``AgentConfiguration/connectTimeout`` (scripts, one-shot commands) a broker
    /// that cannot be reached in time ends the agent with one line, "cannot reach the
    /// broker at H:P: <why>". Without one (an interactive session) it keeps trying, says
    /// so once, and says when it is through.
    public func connect() async throws {
        let target = "\(configuration.host):\(configuration.port)"
        do {
            if let timeout = configuration.connectTimeout {
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask { try await self.client.connect(); return true }
                    group.addTask { try await Task.sleep(for: timeout); return false }
                    let connected = try await group.next() ?? false
                    group.cancelAll()
                    guard connected else {
                        throw AgentError("cannot reach the broker at \(target): \(Self.why(client.lastProblem, timeout: timeout))")
                    }
                }
            } else {
                let announce = Task { [self] () -> Bool in
                    do { try await Task.sleep(for: .seconds(3)) } catch { return false }
                    console.error("cannot reach the broker at \(target) yet: \(Self.why(client.lastProblem, timeout: .seconds(3))); still trying (Ctrl-C to stop)")
                    return true
                }
                defer { announce.cancel() }
                try await client.connect()
                announce.cancel()
                if await announce.value { console.error("connected to the broker at \(target)") }
            }
        } catch let error as MQTTError {
            throw AgentError("cannot reach the broker at \(target): \(error.message)")
        }
        try await client.publish(presenceTopic, payload: Self.online, qos: .atLeastOnce, retain: true)
        logger.debug("connected as \(clientId)")
    }

    /// The reason to print for a connection that did not come: what the client last
    /// saw, or, when the TCP connection opened but nothing answered, that the port does
    /// not seem to speak MQTT.
    static func why(_ problem: String?, timeout: Duration) -> String {
        if let problem { return problem }
        return "no MQTT answer within \(timeout) (is that port an MQTT broker? a TLS listener needs --tls-ca-file)"
    }

    /// Background work every mode needs while it runs: after a reconnect, says online
    /// again (the will may have said offline) and resends every pending item with its
    /// id; every second, resends what waited too long for its receipt. Runs until
    /// cancelled.
    public func maintain() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                var sawDisconnect = false
                for await event in client.events {
                    switch event {
                    case .disconnected(let reason):
                        if !sawDisconnect, !closing.load(ordering: .relaxed) {
                            logger.warning("disconnected: \(reason)")
                            console.error("lost the broker at \(configuration.host):\(configuration.port): \(reason); reconnecting")
                        }
                        sawDisconnect = true
                    case .connected:
                        guard sawDisconnect else { continue }
                        sawDisconnect = false
                        console.error("back on the broker at \(configuration.host):\(configuration.port)")
                        logger.notice("reconnected; resending what is pending")
                        try? client.enqueue(presenceTopic, payload: Self.online, qos: .atLeastOnce, retain: true)
                        await sender.resendAll()
                    }
                }
            }
            group.addTask { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    await sender.resendDue()
                }
            }
            await group.waitForAll()
        }
    }

    /// Says offline, then clears its retained presence, and disconnects cleanly (so the
    /// will is not needed). Each run has a client id of its own; without the clearing,
    /// every run left a retained `{"online":false}` on the broker forever. The offline
    /// message goes first because the coordinator ignores an empty presence payload: it
    /// learns "offline", then the broker forgets the topic. (After a crash the will's
    /// retained offline stays, which is what tells the coordinator.)
    public func close() async {
        closing.store(true, ordering: .relaxed)
        if client.isConnected {
            try? await client.publish(presenceTopic, payload: Self.offline, qos: .atLeastOnce, retain: true)
            try? await client.publish(presenceTopic, payload: [], qos: .atLeastOnce, retain: true)
        }
        await client.disconnect()
    }

    /// Reads one receipt message; logs and returns nil for an unreadable one.
    /// The loop of an agent driven by stdin (room, dm): its receipts and its own topics
    /// are handled as they arrive; after `settle` (time for the retained snapshots to
    /// arrive) `start` runs, then every stdin line until `line` says stop or stdin ends;
    /// `finish` gives the exit code.
    public func runInteractive(
        topics filters: [String],
        input: AsyncStream<String>,
        settle: Duration,
        receipt: @escaping @Sendable (Receipt) async -> Void,
        message: @escaping @Sendable (MQTTMessage) async -> Void,
        start: @escaping @Sendable () async -> Void,
        line: @escaping @Sendable (String) async -> Bool,
        finish: @escaping @Sendable () async -> Int32
    ) async throws -> Int32 {
        let receipts = try await subscribe([topics.receipts(user: user)])
        let messages = try await subscribe(filters)
        try await connect()

        return try await withThrowingTaskGroup(of: Int32?.self) { group in
            group.addTask { await self.maintain(); return nil }
            group.addTask {
                for try await m in receipts {
                    guard let r = self.decodeReceipt(m) else { continue }
                    await receipt(r)
                }
                return nil
            }
            group.addTask {
                for try await m in messages { await message(m) }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: settle)
                await start()
                for await text in input where await line(text) == false { break }
                return await finish()
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let code = result { return code }
            }
            return 1
        }
    }

    public func decodeReceipt(_ message: MQTTMessage) -> Receipt? {
        do {
            // A duplicate that carries its first copy's outcome counts as that outcome.
            return try Receipt.decode(message.payload).resolved
        } catch {
            logger.warning("unreadable receipt on \(message.topic): \(error)")
            return nil
        }
    }
}

