import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TandemCore
import TandemMQTT
import TandemStore

/// The coordinator as a long-running service: one visible pipeline,
/// topic → decode → order → apply → persist → publish.
///
/// All state lives in one ``Engine`` value owned by the single task that runs
/// ``run()``; the MQTT client's callbacks only feed messages into that task's inbox,
/// and the store is an actor the task awaits. A batch is written to SQLite in one
/// transaction *before* anything it produced is published.
public final class CoordinatorService: Service {
    let configuration: CoordinatorConfiguration
    let logger: Logger
    let topics: Topics
    /// What `/healthz` reports; the service moves it along (Health.swift).
    public let health: HealthState
    /// Where the engine's counters and the service's timings go (MetricsExporter.swift).
    let exporter: MetricsExporter

    public init(configuration: CoordinatorConfiguration, logger: Logger, health: HealthState = HealthState(), metrics: MetricsExporter = MetricsExporter()) {
        self.configuration = configuration
        self.logger = logger
        self.topics = Topics(root: configuration.topicRoot)
        self.health = health
        self.exporter = metrics
    }

    enum Input: Sendable {
        case message(MQTTMessage)
        case connection(MQTTConnectionEvent)
        case inboundEnded(String)
        case tick
        case metricsTick
        /// A query could not be answered from the database (counted in the metrics).
        case queryFailed
        case shutdown
    }

    public func run() async throws {
        let startedAt = WallClock.now()
        let store: any CoordinatorStore
        do {
            store = try TandemStore.open(path: configuration.databasePath)
        } catch {
            logger.critical("cannot open the database", error: error, metadata: ["database": "\(configuration.databasePath)"])
            throw error
        }
        var engine = try await Recovery.engine(configuration: configuration, store: store, now: startedAt)
        let reader: any CoordinatorStore
        do {
            reader = try store.queryReader()
        } catch {
            await store.close()
            logger.critical("cannot open a reader on the database", error: error, metadata: ["database": "\(configuration.databasePath)"])
            throw error
        }
        logger.info("database open", metadata: ["database": "\(configuration.databasePath)", "epoch": "\(engine.epoch)", "holds": "\(engine.summaryLine)"])

        let client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: configuration.host,
                port: configuration.port,
                clientId: configuration.clientId,
                username: configuration.username,
                password: configuration.password,
                will: MQTTWill(topic: topics.coordinatorStatus, payload: Self.offlinePayload, qos: .atLeastOnce, retain: true),
                session: .persistent(expirySeconds: configuration.sessionExpirySeconds),
                maxInflight: 20_000,
                receiveMaximum: 20_000,
                tls: configuration.tls
            ),
            logger: logger
        )
        // Registered before CONNECT: whatever the broker queued for our session while we
        // were down is delivered into this subscription, not dropped.
        let inbound = try await client.subscribe(topics.inboundFilters, qos: .atLeastOnce)
        logger.info(configuration.tls == nil ? "connecting to the MQTT broker" : "connecting to the MQTT broker over TLS", metadata: [
            "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)",
            "mqtt.username": "\(configuration.username ?? "(anonymous)")", "mqtt.client_id": "\(configuration.clientId)",
        ])
        do {
            try await cancelWhenGracefulShutdown { try await client.connect() }
        } catch {
            await client.disconnect()
            await reader.close()
            await store.close()
            if error is CancellationError { return }
            logger.critical("cannot connect to the broker", error: error)
            throw error
        }
        try await client.publish(topics.coordinatorStatus, payload: onlinePayload(startedAt: startedAt), qos: .atLeastOnce, retain: true)
        health.role = .leader(term: 0, online: true)
        logger.info("online: every subscription acknowledged; status published", metadata: ["topic": "\(topics.coordinatorStatus)"])
        // Every snapshot again (the broker may have lost its retained copies), in chunks
        // from the pipeline's steps so that they never all sit in memory at once.
        engine.startRepublishing(now: WallClock.now())

        var failure: (any Error)?
        do {
            try await pipeline(engine: &engine, client: client, store: store, reader: reader, inbound: inbound, startedAt: startedAt)
        } catch {
            failure = error
            logger.critical("stopping after an error", error: error)
        }
        health.role = .stopping

        // Drain: nothing new is taken; what waits in the reorder buffer is applied now,
        // committed, and published with the last snapshots.
        if failure == nil {
            let last = engine.flush(now: WallClock.now())
            do {
                try await commit(last, engine: &engine, store: store, client: client)
            } catch {
                failure = error
                logger.critical("final commit failed", error: error)
            }
        }
        do {
            try await client.publish(topics.coordinatorStatus, payload: Self.offlinePayload, qos: .atLeastOnce, retain: true)
        } catch {
            logger.warning("could not publish the offline status", error: error)
        }
        await client.disconnect()
        await reader.close()
        await store.close()
        if let failure { throw failure }
        logger.info("stopped cleanly")
    }

    private func pipeline(
        engine: inout Engine, client: MQTTClient, store: any CoordinatorStore, reader: any CoordinatorStore,
        inbound: MQTTSubscription, startedAt: Millis
    ) async throws {
        let (inputs, feed) = AsyncStream.makeStream(of: Input.self)
        // Queries leave the pipeline here: answered one after another from the reader's
        // own connection, while the pipeline goes on with everyone's events.
        let (queries, queryFeed) = AsyncStream.makeStream(of: Engine.Query.self)
        let metricsInterval = Duration.milliseconds(configuration.metricsIntervalMs)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    for try await message in inbound { feed.yield(.message(message)) }
                    feed.yield(.inboundEnded("subscription finished"))
                } catch {
                    feed.yield(.inboundEnded("\(error)"))
                }
            }
            group.addTask {
                for await event in client.events { feed.yield(.connection(event)) }
            }
            group.addTask { [self] in
                for await query in queries where await !answer(query, store: reader, client: client) {
                    feed.yield(.queryFailed)
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: metricsInterval)
                    feed.yield(.metricsTick)
                }
            }
            defer { group.cancelAll() }

            let timer = DeadlineTimer(feed: feed)
            // Work may be due before any message arrives (the republishing after a start,
            // leases that ran out while we were down).
            if let deadline = engine.nextDeadline { timer.schedule(at: deadline) }
            var connections = 0
            try await withGracefulShutdownHandler {
                loop: for await input in inputs {
                    let now = WallClock.now()
                    switch input {
                    case .message(let message):
                        let immediate = engine.ingest(topic: message.topic, payload: message.payload, now: now)
                        exporter.observe(engine)
                        send(immediate, via: client, metrics: &engine.metrics)
                        for query in engine.takeQueries() { queryFeed.yield(query) }
                    case .connection(.connected(let sessionPresent)):
                        connections += 1
                        connectionChanged(up: true, reconnect: connections > 1)
                        // The first is the connect() above, which published the status already.
                        guard connections > 1 else { break }
                        logger.info("MQTT reconnected", metadata: ["mqtt.session_present": "\(sessionPresent)"])
                        // A will may have marked us offline while the connection was down.
                        client.enqueueLogged(topics.coordinatorStatus, payload: onlinePayload(startedAt: startedAt), retain: true, logger: logger)
                    case .connection(.disconnected(let reason)):
                        connectionChanged(up: false)
                        logger.warning("MQTT connection lost", metadata: ["reason": "\(reason)"])
                    case .inboundEnded(let reason):
                        logger.error("inbound subscription ended", metadata: ["reason": "\(reason)"])
                        break loop
                    case .metricsTick:
                        let metrics = engine.metricsPublication(uptimeSeconds: Double(now - startedAt) / 1000)
                        client.enqueueLogged(metrics.topic, payload: metrics.payload, qos: .atMostOnce, retain: true, logger: logger)
                        exporter.mirror()
                    case .queryFailed:
                        engine.metrics.errors += 1
                    case .tick:
                        break
                    case .shutdown:
                        logger.info("shutting down: draining")
                        break loop
                    }
                    if let deadline = engine.nextDeadline, deadline <= WallClock.now() {
                        let step = engine.step(now: WallClock.now())
                        try await commit(step, engine: &engine, store: store, client: client)
                    }
                    if let deadline = engine.nextDeadline {
                        timer.schedule(at: deadline)
                    }
                    exporter.observe(engine)
                }
            } onGracefulShutdown: {
                feed.yield(.shutdown)
            }
        }
    }

    /// Persists a step's batch in one transaction, then publishes what it produced.
    private func commit(_ step: Engine.Step, engine: inout Engine, store: any CoordinatorStore, client: MQTTClient) async throws {
        if !step.batch.isEmpty {
            let clock = ContinuousClock()
            let started = clock.now
            do {
                try await store.commit(step.batch)
            } catch {
                exporter.storeFailed(.commit)
                throw error
            }
            let elapsed = clock.now - started
            exporter.committed(after: elapsed, events: step.batch.events.count)
            let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
            engine.metrics.batches += 1
            engine.metrics.commitMillisTotal += ms
            engine.metrics.commitMillisMax = max(engine.metrics.commitMillisMax, ms)
        }
        // Before anything goes out: a scrape after a receipt arrived counts it.
        exporter.observe(engine)
        send(step.publications, via: client, metrics: &engine.metrics)
    }

    private func send(_ publications: [Publication], via client: MQTTClient, metrics: inout Metrics) {
        let now = WallClock.now()
        for p in publications {
            sending(p, now: now)
            do {
                try client.enqueue(p.topic, payload: p.payload, qos: p.qos == 0 ? .atMostOnce : .atLeastOnce, retain: p.retain)
                metrics.messagesOut += 1
            } catch {
                metrics.publishErrors += 1
                logger.debug("publish failed", error: error, metadata: ["topic": "\(p.topic)"])
            }
        }
    }

    static let offlinePayload = JSON.obj(["online": false]).serialized()

    func onlinePayload(startedAt: Millis) -> [UInt8] {
        JSON.obj(["online": true, "startedAt": .int(startedAt), "version": .string(TandemVersion.current)]).serialized()
    }

    /// What `--check` and `--backup` print: the integrity check and the summary.
    public struct CheckReport: Sendable {
        /// The database file checked.
        public var path: String
        /// "ok", or SQLite's list of problems.
        public var integrity: String
        public var summary: StoreSummary
        public var isSound: Bool { integrity == "ok" }

        /// For a person: one fact per line, sizes and dates readable.
        public var text: String {
            let s = summary
            let created = Date(timeIntervalSince1970: Double(s.createdAt) / 1000).formatted(.iso8601)
            return """
                integrity: \(integrity)
                database: \(path) (schema v\(s.schemaVersion), epoch \(s.epoch), created \(created))
                size: \(Self.bytes(s.fileBytes)) (+ \(Self.bytes(s.walBytes)) write-ahead log not yet checkpointed)
                rooms: \(s.rooms), conversations: \(s.conversations), workouts: \(s.workouts)
                DM messages: \(s.messages), events logged: \(s.events), remembered ids: \(s.seenIds), logbook entries: \(s.logbookRows)
                """
        }

        /// For scripts (`--check --json`): one JSON object.
        public var json: String {
            let s = summary
            let bytes = JSON.obj([
                "path": .string(path), "integrity": .string(integrity), "sound": .bool(isSound),
                "schemaVersion": .int(Int64(s.schemaVersion)), "epoch": .string(s.epoch), "createdAt": .int(s.createdAt),
                "fileBytes": .int(s.fileBytes), "walBytes": .int(s.walBytes),
                "rooms": .int(Int64(s.rooms)), "conversations": .int(Int64(s.conversations)), "workouts": .int(Int64(s.workouts)),
                "messages": .int(Int64(s.messages)), "events": .int(Int64(s.events)), "seenIds": .int(Int64(s.seenIds)),
                "logbookRows": .int(Int64(s.logbookRows)),
            ]).serialized()
            return String(decoding: bytes, as: UTF8.self)
        }

        static func bytes(_ n: Int64) -> String {
            if n < 1024 { return "\(n) B" }
            let units = ["KiB", "MiB", "GiB", "TiB"]
            var value = Double(n) / 1024
            var unit = 0
            while value >= 1024, unit < units.count - 1 {
                value /= 1024
                unit += 1
            }
            return String(format: "%.1f %@", value, units[unit])
        }
    }

    /// `--check`: the database's integrity and what it holds.
    public static func checkDatabase(at path: String) async throws -> CheckReport {
        guard FileManager.default.fileExists(atPath: path) else {
            throw CheckError(message: "no database at \(path)")
        }
        let store = try TandemStore.open(path: path)
        do {
            let integrity = try await store.integrityCheck()
            let summary = try await store.summary()
            await store.close()
            return CheckReport(path: path, integrity: integrity, summary: summary)
        } catch {
            await store.close()
            throw error
        }
    }

    /// `--backup`: a consistent copy of the database at `path` written to `destination`
    /// (which must not exist) with `VACUUM INTO` over a connection of its own. SQLite's WAL
    /// lets this reader run beside a coordinator that keeps committing: the copy is the
    /// database as of one commit. Returns the check of the copy.
    public static func backupDatabase(at path: String, to destination: String) async throws -> CheckReport {
        guard FileManager.default.fileExists(atPath: path) else {
            throw CheckError(message: "no database at \(path)")
        }
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw CheckError(message: "\(destination) already exists: a backup never overwrites a file; name a new one")
        }
        let store = try TandemStore.open(path: path)
        do {
            try await store.backup(to: destination)
            await store.close()
        } catch {
            await store.close()
            throw error
        }
        return try await checkDatabase(at: destination)
    }

    struct CheckError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}

/// Wakes the pipeline at the engine's next deadline (reorder window, lease, grace,
/// throttled snapshot). Only an earlier deadline than the one pending schedules anew.
final class DeadlineTimer: Sendable {
    let feed: AsyncStream<CoordinatorService.Input>.Continuation
    let pending = Mutex<Millis?>(nil)

    init(feed: AsyncStream<CoordinatorService.Input>.Continuation) {
        self.feed = feed
    }

    func schedule(at deadline: Millis) {
        let needed = pending.withLock { current -> Bool in
            if let current, current <= deadline, current > WallClock.now() - 1000 { return false }
            current = deadline
            return true
        }
        guard needed else { return }
        Task { [self] in
            let delay = deadline - WallClock.now()
            if delay > 0 { try? await Task.sleep(for: .milliseconds(delay)) }
            self.pending.withLock { if $0 == deadline { $0 = nil } }
            self.feed.yield(.tick)
        }
    }
}

extension MQTTClient {
    func enqueueLogged(_ topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool, logger: Logger) {
        do {
            try enqueue(topic, payload: payload, qos: qos, retain: retain)
        } catch {
            logger.debug("publish failed", error: error, metadata: ["topic": "\(topic)"])
        }
    }
}
