import Logging
import TandemCore
import TandemMQTT

/// One agent's run: a ``TandemClient`` under a fresh client id (which does the
/// presence, the receipts and resends, the replicas), and what the agent says about
/// it: why the broker is not reached, the connection lost and back, the coordinator
/// leaving and returning.
///
/// Use: watch what the mode needs on ``client`` first (retained messages come with the
/// connection), then ``connect()`` (or ``runInteractive(input:settle:consumers:start:line:finish:)``),
/// and ``close()`` at the end.
public final class AgentSession: Sendable {
    public let configuration: AgentConfiguration
    public let clientId: String
    public let client: TandemClient
    public let console: Console
    public let logger: Logger

    public var topics: Topics { configuration.topics }
    public var user: String { configuration.user }
    /// `host:port`, as the agent names the broker.
    private var target: String { "\(configuration.host):\(configuration.port)" }

    public init(configuration: AgentConfiguration, console: Console, logger: Logger) throws {
        self.configuration = configuration
        self.console = console
        self.logger = logger
        // Client ids allow more than identifiers, but keeping to them keeps the presence
        // topic level readable.
        clientId = "agent-\(configuration.user.prefix(40))-\(IdentifierGenerator.randomHex(8))"
        let transport = try MosquittoTransport(
            host: configuration.host, port: configuration.port, username: configuration.username,
            password: configuration.password, tls: configuration.tls, user: configuration.user, clientId: clientId,
            topics: configuration.topics, logger: logger)
        client = TandemClient(transport: transport, user: configuration.user, clientId: clientId, topics: configuration.topics,
                              flightInterval: configuration.flightInterval, logger: logger)
    }

    /// Connects and says we are online.
    ///
    /// With a ``AgentConfiguration/connectTimeout`` (scripts, one-shot commands) a broker
    /// that cannot be reached in time ends the agent with one line, "cannot reach the
    /// broker at H:P: <why>". Without one (an interactive session) it keeps trying, says
    /// so once, and says when it is through.
    public func connect() async throws {
        do {
            if let timeout = configuration.connectTimeout {
                try await client.connect(timeout: timeout)
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
        } catch TandemClientError.unreachable(let problem, let timeout) {
            throw AgentError("cannot reach the broker at \(target): \(Self.why(problem, timeout: timeout))")
        } catch TandemClientError.connectFailed(let reason) {
            // A refusal names the broker itself (it was reached: the credentials were not
            // good); other reasons get the broker's address in front.
            throw AgentError(reason.contains(target) ? reason : "cannot reach the broker at \(target): \(reason)")
        }
    }

    /// The reason to print for a connection that did not come: what the transport last
    /// saw, or, when the TCP connection opened but nothing answered, that the port does
    /// not seem to speak MQTT.
    static func why(_ problem: String?, timeout: Duration) -> String {
        if let problem { return problem }
        return "no MQTT answer within \(timeout) (is that port an MQTT broker? a TLS listener needs --tls-ca-file)"
    }

    /// Says when the connection is lost and when it is back, until the client closes.
    public func reportConnection(_ changes: AsyncStream<ConnectionChange>) async {
        for await change in changes {
            switch change {
            case .lost(let reason): console.error("lost the broker at \(target): \(reason); reconnecting")
            case .restored: console.error("back on the broker at \(target)")
            }
        }
    }

    /// Says when the coordinator goes offline and when it is back, until the client closes.
    public func reportCoordinator(_ statuses: AsyncStream<CoordinatorStatus>) async {
        var watch = CoordinatorWatch()
        for await status in statuses {
            if let news = watch.note(online: status.online) { console.output(human: news.human, json: news.json) }
        }
    }

    /// Says offline, clears the retained presence and disconnects (``TandemClient/close()``).
    public func close() async {
        await client.close()
    }

    /// The loop of an agent driven by stdin (room, dm): connects, runs `consumers` (each
    /// follows one of the client's streams, watched before this call) while saying what
    /// happens to the connection and the coordinator; after `settle` (time for the
    /// retained snapshots to arrive) `start` runs, then every stdin line until `line`
    /// says stop or stdin ends; `finish` gives the exit code.
    public func runInteractive(
        input: AsyncStream<String>,
        settle: Duration,
        consumers: [@Sendable () async -> Void],
        start: @escaping @Sendable () async -> Void,
        line: @escaping @Sendable (String) async -> Bool,
        finish: @escaping @Sendable () async -> Int32
    ) async throws -> Int32 {
        let coordinator = try await client.coordinatorStatus()
        let connection = await client.connectionChanges()
        try await connect()

        return try await withThrowingTaskGroup(of: Int32?.self) { group in
            group.addTask { await self.reportConnection(connection); return nil }
            group.addTask { await self.reportCoordinator(coordinator); return nil }
            for consumer in consumers {
                group.addTask { await consumer(); return nil }
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

    /// The end of a script (stdin done): waits for the receipts of what was sent (up
    /// to `timeout`), says what got none, runs `beforeClosing`, closes, and returns the
    /// exit code (``AgentExit``). `failures`: requests that failed otherwise (a query
    /// refused), counted as rejections.
    public func finishScript(badLines: Int, failures: Int = 0, timeout: Duration, beforeClosing: @Sendable () async -> Void = {}) async -> Int32 {
        let abandoned = await client.settle(timeout: timeout)
        for outgoing in abandoned {
            console.error("no receipt for \(outgoing.label) (\(outgoing.id)) after \(timeout.components.seconds) s", code: "timeout")
        }
        await beforeClosing()
        let rejected = await client.rejectedCount
        await close()
        return AgentExit.code(badLines: badLines, rejected: rejected + failures, abandoned: abandoned.count)
    }
}

extension Console {
    /// The receipt of something the agent sent: a rejection in one line for people
    /// ("rejected: move s1: owned_by_other: ..."), every receipt as an object with --json.
    public func receipt(_ receipt: Receipt, label: String) {
        if receipt.status == .rejected {
            output(human: "rejected: \(label): \(receipt.code?.rawValue ?? "error"): \(receipt.message)", json: receipt.json.typed("receipt"))
        } else {
            object(receipt.json.typed("receipt"))
        }
    }
}
