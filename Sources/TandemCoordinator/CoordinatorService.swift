import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TandemCore
import TandemEngine
import TandemMQTT
#if PostgreSQL
import TandemPostgres
#endif
import TandemStore

/// The coordinator as a long-running service: one visible pipeline,
/// topic → decode → order → apply → persist → publish.
///
/// All state lives in one ``Engine`` value owned by the single task that runs the
/// pipeline; the MQTT client's callbacks only feed messages into that task's inbox,
/// and the store is an actor the task awaits. A batch is written to the store in one
/// transaction *before* anything it produced is published.
///
/// Who leads: on SQLite this process owns the file (a lock; a second coordinator on
/// the same file exits at once) and leads until it stops. On PostgreSQL it waits as a
/// standby until it takes the leader lease, leads for as long as it keeps the lease
/// (``LeaseFence``), and goes back to standing by if it loses it. Only a leader
/// connects with the shared client id. Either way the process announces itself on its
/// own `coordinator/instances/{instanceId}`.
public final class CoordinatorService: Service {
    let configuration: CoordinatorConfiguration
    let logger: Logger
    let topics: Topics
    /// What `/healthz` reports; the service moves it along (Health.swift).
    public let health: HealthState
    /// Where the engine's counters and the service's timings go (MetricsExporter.swift).
    let exporter: MetricsExporter
    /// Wall time for the wire, a monotonic tick for every deadline.
    let clock = CoordinatorClock()
    /// A publication above the broker's packet limit was logged once (``send(_:via:metrics:)``).
    let oversizeReported = Atomic<Bool>(false)

    public init(
        configuration: CoordinatorConfiguration, logger: Logger, health: HealthState? = nil,
        metrics: MetricsExporter = MetricsExporter()
    ) {
        self.configuration = configuration
        self.logger = logger
        self.topics = Topics(root: configuration.engine.topicRoot)
        self.health = health ?? HealthState(instanceId: configuration.instanceId)
        self.exporter = metrics
    }

    public func run() async throws {
        let startedAt = WallClock.now()
        let location = try StoreLocation(configuration.databasePath)
        logger.info("starting", metadata: ["instance": "\(configuration.instanceId)", "database": "\(location)"])
        switch location {
        case .sqlite(let path):
            try await runOnSQLite(path: path, startedAt: startedAt)
        case .postgres(let url):
            #if PostgreSQL
            if configuration.engine.partitioning.count > 1 {
                try await runSharedOnPostgres(url: url, startedAt: startedAt)
            } else {
                try await runOnPostgres(url: url, startedAt: startedAt)
            }
            #else
            _ = url
            throw CoordinatorError(StoreLocation.noPostgresInThisBuild)
            #endif
        }
    }

    // MARK: SQLite: one owner

    private func runOnSQLite(path: String, startedAt: Millis) async throws {
        // Before anything else: a second coordinator on this file stops here, at once,
        // without touching the broker (it would kick the owner off the shared client id).
        let owner: DatabaseOwnerLock
        let store: SQLiteStore
        let checkpointer: SQLiteStore
        // The first partition's pipeline thread, which the writer runs on (below).
        let pipelineLoop = try PollLoop(name: "pipeline-p0", turnSpacing: configuration.turnSpacing)
        defer { pipelineLoop.stop() }
        do {
            owner = try DatabaseOwnerLock.acquire(path: path)
            // Commits never checkpoint the WAL themselves: a connection of its own does,
            // beside them (off the hot path), and the writer only starts the WAL over
            // between two commits (WALCheckpointer).
            // The writer runs on the first partition's pipeline thread: a commit is a
            // call on the thread that decided it, not two thread switches; a commit that
            // finds another connection's write lock waits as a sleeping task, so the
            // thread goes on reading the broker (docs/ARCHITECTURE.md, "Concurrency").
            store = try SQLiteStore.open(path: path, checkpoints: .separate, executor: pipelineLoop)
            // Fixed with the database: refused, before the broker is touched, if it differs.
            try await store.fixPartitions(configuration.engine.partitioning.count)
            checkpointer = try SQLiteStore.openCheckpointer(path: path)
        } catch {
            logger.critical("cannot open the database", error: error, metadata: ["database": "\(path)"])
            throw error
        }
        let announcer = try InstanceAnnouncer(configuration: configuration, topics: topics, startedAt: startedAt, logger: logger)
        announcer.start()
        announcer.announce(.leader(term: 0, partitions: Array(0..<configuration.engine.partitioning.count)))
        defer { withExtendedLifetime(owner) {} }
        do {
            _ = try await lead(store: store, term: 0, fence: nil, checkpointer: WALCheckpointer(writer: store, checkpointer: checkpointer), firstLoop: pipelineLoop)
        } catch {
            await checkpointer.close()
            await announcer.stop()
            throw error
        }
        await checkpointer.close()
        await announcer.stop()
    }

    // MARK: PostgreSQL: a leader and standbys

    #if PostgreSQL
    private func runOnPostgres(url: PostgresURL, startedAt: Millis) async throws {
        let leaseMs = configuration.leaderLeaseMs
        let lease = PostgresLease(url: url, instance: configuration.instanceId, leaseMs: leaseMs, logger: logger)
        let (announcer, link, probing, poll, renewEvery) = try startStandingBy(startedAt: startedAt)
        defer {
            probing.cancel()
            Task { await lease.close() }
        }
        // After a term that ended without a shutdown: say so, and give the lease up if
        // nobody took it yet (the next leader, maybe this process under a new term, need
        // not wait it out). Said first: cut from the database, the release waits for a
        // connection that does not come.
        func standBy(after term: Int64) async {
            announcer.announce(.standby)
            health.role = .standby
            try? await lease.release(term: term)
        }
        do {
            try await cancelWhenGracefulShutdown { try await self.prepareSchema(lease, database: url.description, poll: poll) }
            while true {
                let (acquired, sentAt) = try await cancelWhenGracefulShutdown {
                    try await waitForLease(lease, link: link, poll: poll, logger: self.logger)
                }
                logger.notice("leader: took the lease, term \(acquired.term) (\(Self.howTaken(acquired.previous, first: "the database's first leader")))",
                              metadata: ["term": "\(acquired.term)"])
                health.role = .starting
                let end = await leadFenced(url: url, term: acquired.term, sentAt: sentAt, lease: lease, renewEvery: renewEvery, announcer: announcer, link: link)
                switch end {
                case .shutdown:
                    do {
                        try await lease.release(term: acquired.term)
                        logger.info("released the lease of term \(acquired.term): a standby takes over at its next look")
                    } catch {
                        logger.warning("could not release the lease of term \(acquired.term) (a standby takes over when it runs out): \(error)")
                    }
                    await announcer.stop()
                    return
                case .leaseLost(let reason):
                    logger.error("lost the leader lease of term \(acquired.term): \(reason). Stopped processing and publishing, dropped the shared client id's connection; standing by.", metadata: ["term": "\(acquired.term)"])
                    await standBy(after: acquired.term)
                case .failed(let error):
                    throw error
                case .retry(let reason):
                    logger.error("gave up term \(acquired.term): \(reason); standing by", metadata: ["term": "\(acquired.term)"])
                    await standBy(after: acquired.term)
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: poll * 4) }
                }
            }
        } catch is CancellationError {
            health.role = .stopping
            logger.info("stopped cleanly (standby)")
            await announcer.stop()
        } catch {
            health.role = .stopping
            logger.critical("stopping", error: error)
            await announcer.stop()
            throw error
        }
    }

    /// A PostgreSQL process starts as a standby: announced, its link to the broker
    /// watched on the instance connection (`probing` sends the probes until the caller
    /// cancels it), and how often it looks at the leases and renews those it holds (a
    /// quarter lease; looks at most every 500 ms).
    func startStandingBy(startedAt: Millis) throws -> (
        announcer: InstanceAnnouncer, link: BrokerLink, probing: Task<Void, Never>, poll: Duration, renewEvery: Duration
    ) {
        let leaseMs = configuration.leaderLeaseMs
        let announcer = try InstanceAnnouncer(configuration: configuration, topics: topics, startedAt: startedAt, logger: logger)
        announcer.start()
        announcer.announce(.standby)
        health.role = .standby
        let link = BrokerLink(client: announcer.client, instanceTopic: announcer.topic, silenceLimit: .milliseconds(configuration.brokerSilenceMs))
        let probing = Task { await link.run() }
        return (announcer, link, probing, .milliseconds(min(500, max(50, leaseMs / 4))), .milliseconds(max(50, leaseMs / 4)))
    }

    /// What the lease row said before this process took it, for the log.
    static func howTaken(_ previous: PostgresLease.Holder, first: String) -> String {
        previous.instance.isEmpty ? first
            : previous.released ? "instance \(previous.instance) released term \(previous.term)"
            : "instance \(previous.instance)'s lease of term \(previous.term) ran out \(Double(-previous.expiresInMs) / 1000) s ago"
    }

    /// A term under the lease just taken (`lease`'s row, term `term`, the take sent at
    /// `sentAt`): the fence kept renewed beside ``leadTerm(url:fence:announcer:shared:)``
    /// until either ends, and lost when the broker falls silent (`link`); how the term ended.
    func leadFenced(
        url: PostgresURL, term: Int64, sentAt: ContinuousClock.Instant, lease: PostgresLease, renewEvery: Duration,
        announcer: InstanceAnnouncer, link: BrokerLink, shared: (partition: Int, partitions: SharedPartitions)? = nil
    ) async -> TermEnd {
        let fence = LeaseFence(term: term, leaseMs: lease.leaseMs, acquireSentAt: sentAt)
        return await withTaskGroup(of: TermEnd?.self) { group -> TermEnd in
            group.addTask { await fence.keep(with: lease, renewEvery: renewEvery, logger: self.logger); return nil }
            group.addTask {
                if let quiet = await link.waitForSilence() { fence.lose(.brokerSilent(forMs: quiet.roundedMillis)) }
                return nil
            }
            group.addTask { await self.leadTerm(url: url, fence: fence, announcer: announcer, shared: shared) }
            var end = TermEnd.leaseLost(.deadlinePassed(byMs: 0))
            for await result in group {
                if let result {
                    end = result
                    break
                }
            }
            group.cancelAll()
            return end
        }
    }

    /// Creates the schema if the database is new, waiting for a database that cannot be
    /// reached yet (it may be starting beside us).
    func prepareSchema(_ lease: PostgresLease, database: String, poll: Duration) async throws {
        var told = false
        while true {
            do {
                try await lease.prepare(partitions: configuration.engine.partitioning.count, database: database)
                return
            } catch let error as PostgresStoreError where error.isConnectionLoss {
                if !told { logger.warning("cannot reach the database yet; trying again", error: error) }
                told = true
                try await Task.sleep(for: poll)
            }
        }
    }

    /// One leader term on PostgreSQL: open the store under the term's fence, lead. With
    /// `shared`, the term of one partition, whose commits its own lease row fences.
    func leadTerm(url: PostgresURL, fence: LeaseFence, announcer: InstanceAnnouncer,
                  shared: (partition: Int, partitions: SharedPartitions)? = nil) async -> TermEnd {
        do {
            let store = try await PostgresStore.open(
                url: url, fence: .init(term: fence.term, leaseMs: fence.leaseMs, partition: shared?.partition, holds: { fence.holds }),
                logger: logger)
            if shared == nil {
                announcer.announce(.leader(term: fence.term, partitions: Array(0..<configuration.engine.partitioning.count)))
            }
            return try await lead(store: store, term: fence.term, fence: fence, shared: shared)
        } catch let error as PostgresStoreError {
            if let lost = fence.lostReason { return .leaseLost(lost) }
            switch error.kind {
            case .fenced: return .leaseLost(.commitRefused(error.message))
            case .connection: return .retry(error.message)
            case .server, .schema: return .failed(error)
            }
        } catch let error as MQTTError where error.kind == .fenced {
            return .leaseLost(fence.lostReason ?? .deadlinePassed(byMs: 0))
        } catch {
            if let lost = fence.lostReason { return .leaseLost(lost) }
            return .failed(error)
        }
    }
    #endif

    /// How a leader's term ended.
    enum TermEnd: Sendable {
        /// SIGTERM or SIGINT: drained, committed, published, offline status published.
        case shutdown
        /// The lease is gone: nothing more was committed or published.
        case leaseLost(LeaseLoss)
        /// The database went away before the term could start (recovery failed).
        case retry(String)
        /// Something retrying cannot fix (a refused commit): the process stops.
        case failed(any Error)

        var isShutdown: Bool {
            if case .shutdown = self { return true }
            return false
        }
    }

    static let offlinePayload = JSON.obj(["online": false]).serialized()

    func onlinePayload(startedAt: Millis, term: Int64) -> [UInt8] {
        JSON.obj([
            "online": true, "startedAt": .int(startedAt), "version": .string(TandemVersion.current),
            "instance": .string(configuration.instanceId), "term": .int(term),
        ]).serialized()
    }
}

/// Wakes the pipeline at the engine's next deadline (reorder window, lease, grace,
/// throttled snapshot), on the monotonic tick: a wall clock stepped by an hour neither
/// delays a wake-up nor brings one forward. Only an earlier deadline than the one
/// pending schedules anew.
///
/// The wake is a timer of the pipeline's ``PollLoop``: it fires on the pipeline's own
/// thread, in the turn that also reads the sockets, with no thread of its own.
final class DeadlineTimer: Sendable {
    let feed: AsyncStream<CoordinatorService.Input>.Continuation
    let clock: CoordinatorClock
    let loop: PollLoop
    let pending = Mutex<Millis?>(nil)

    init(feed: AsyncStream<CoordinatorService.Input>.Continuation, clock: CoordinatorClock, loop: PollLoop) {
        self.feed = feed
        self.clock = clock
        self.loop = loop
    }

    func schedule(at deadline: Millis) {
        let needed = pending.withLock { current -> Bool in
            if let current, current <= deadline, current > clock.tick() - 1000 { return false }
            current = deadline
            return true
        }
        guard needed else { return }
        let delay = clock.duration(until: deadline)
        loop.schedule(at: .now + max(delay, .zero)) { [self] in
            pending.withLock { if $0 == deadline { $0 = nil } }
            feed.yield(.tick)
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
