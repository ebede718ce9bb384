import Logging
import ServiceLifecycle
import Synchronization
import TandemCore
import TandemEngine
import TandemStore
#if PostgreSQL
import TandemPostgres
#endif

/// What the partitions one process leads share when processes share a database's
/// partitions (PostgreSQL, more than one partition): the broker's admin connection and
/// its users, each running partition's input (to hand it over, or to tell it all), and
/// the readiness that says `coordinator/status` online.
final class SharedPartitions: Sendable {
    let access: BrokerAccessAdmin?
    private let users: Mutex<Set<String>?>
    private let feeds = Mutex<[Int: AsyncStream<CoordinatorService.Input>.Continuation]>([:])
    /// Partitions running here whose session is down now (`/healthz` and the connected
    /// gauge say online only while none is).
    private let down = Mutex<Set<Int>>([])
    /// Marks a partition's term ready in the database: whether every partition now has a
    /// ready leader, and the sum of their terms.
    private let markReady: @Sendable (Int, Int64) async throws -> (all: Bool, termSum: Int64)
    let logger: Logger

    init(access: BrokerAccessAdmin?, knownUsers: Set<String>?, logger: Logger,
         markReady: @escaping @Sendable (Int, Int64) async throws -> (all: Bool, termSum: Int64)) {
        self.access = access
        self.users = Mutex(knownUsers)
        self.logger = logger
        self.markReady = markReady
    }

    var knownUsers: Set<String>? { users.withLock { $0 } }

    /// The partitions whose pipelines run here now, in order.
    var running: [Int] { feeds.withLock { $0.keys.sorted() } }

    func register(_ partition: Int, feed: AsyncStream<CoordinatorService.Input>.Continuation) {
        feeds.withLock { $0[partition] = feed }
    }

    func unregister(_ partition: Int) {
        _ = feeds.withLock { $0.removeValue(forKey: partition) }
        _ = down.withLock { $0.remove(partition) }
    }

    /// `partition`'s session is up again: whether every partition running here is.
    func connected(_ partition: Int) -> Bool {
        down.withLock {
            $0.remove(partition)
            return $0.isEmpty
        }
    }

    func disconnected(_ partition: Int) {
        _ = down.withLock { $0.insert(partition) }
    }

    /// The partition drains (everything it took is committed and published) and ends its
    /// term, as at a shutdown; its lease is then released for the process taking it.
    /// False when its pipeline is not running yet (its term is still starting): asked
    /// again at the next look.
    func handOver(_ partition: Int) -> Bool {
        guard let feed = feeds.withLock({ $0[partition] }) else { return false }
        feed.yield(.shutdown)
        return true
    }

    func broadcast(_ input: CoordinatorService.Input) {
        for feed in feeds.withLock({ Array($0.values) }) { feed.yield(input) }
    }

    /// The broker's users, read again: every partition hears of them, and of new ones
    /// also reconciles (each partition's first role is attached to every user).
    func setKnownUsers(_ users: Set<String>) {
        let grew = self.users.withLock { known in
            defer { known = users }
            return !users.isSubset(of: known ?? [])
        }
        broadcast(.knownUsers(users))
        if grew { broadcast(.reconcileAccess) }
    }

    /// The lowest partition running here (it publishes the process's metrics).
    var lowestRunning: Int? { feeds.withLock { $0.keys.min() } }

    /// `partition`'s session is subscribed under `term`: marked ready, and when every
    /// partition has a ready leader (this was the last), `publish` says online with the
    /// sum of the terms. A database that does not answer is logged: the next partition
    /// ready (or this one's next reconnect) says it.
    func ready(_ partition: Int, term: Int64, publish: (Int64) async throws -> Void) async throws {
        do {
            let (all, sum) = try await markReady(partition, term)
            if all { try await publish(sum) }
        } catch let error as CancellationError {
            throw error
        } catch {
            logger.warning("could not mark partition \(partition) ready: \(error)")
        }
    }
}

#if PostgreSQL
extension CoordinatorService {
    /// The partitions whose terms run in this process, and the first failure of one.
    private final class PartitionTerms: Sendable {
        struct State {
            /// Running partitions and their terms.
            var running: [Int: Int64] = [:]
            var handingOver: Set<Int> = []
            var failure: (any Error)?
        }
        let state = Mutex(State())
    }

    /// PostgreSQL with more than one partition: this process takes at most its share of
    /// the partitions (ceil(P / live processes)), each under its own lease and fencing
    /// term, runs each one's pipeline (``lead(store:term:fence:checkpointer:shared:)``),
    /// hands over what exceeds its share when another process joins (drained, published,
    /// released), and takes partitions whose lease ran out or was released.
    func runSharedOnPostgres(url: PostgresURL, startedAt: Millis) async throws {
        let leaseMs = configuration.leaderLeaseMs
        let count = configuration.engine.partitioning.count
        let instance = configuration.instanceId
        let directory = PostgresLease(url: url, instance: instance, leaseMs: leaseMs, logger: logger)
        let leases = (0..<count).map { PostgresLease(url: url, instance: instance, leaseMs: leaseMs, row: .partition($0), logger: logger) }
        let (announcer, link, probing, poll, renewEvery) = try startStandingBy(startedAt: startedAt)
        defer { probing.cancel() }
        let terms = PartitionTerms()
        func closeLeases() async {
            await directory.close()
            for lease in leases { await lease.close() }
        }
        let shared: SharedPartitions
        do {
            try await cancelWhenGracefulShutdown { try await self.prepareSchema(directory, database: url.description, poll: poll) }
            let started = try await cancelWhenGracefulShutdown { try await self.startBrokerAccess(gate: nil) }
            shared = SharedPartitions(access: started?.admin, knownUsers: started?.users, logger: logger) { partition, term in
                try await leases[partition].markReady(term: term)
            }
        } catch {
            await closeLeases()
            await announcer.stop()
            if error is CancellationError {
                logger.info("stopped cleanly (standby)")
                return
            }
            logger.critical("stopping", error: error)
            throw error
        }
        logger.info("sharing \(count) partitions with the other processes on the database: each takes at most ceil(\(count) / live processes)")

        // Says which partitions this process leads (instances/{id}, /healthz). Read and
        // said under the terms' lock: a partition taken on the poll loop while another's
        // term ends on its task would otherwise race, and the older list could be the
        // one retained (seen in CI: a partition announced by two processes for 40 s).
        @Sendable func announce() {
            terms.state.withLock { state in
                let running = state.running
                if running.isEmpty {
                    announcer.announce(.standby)
                    health.role = .standby
                    exporter.stoppedLeading(lost: false)
                } else {
                    // The leader-term gauge says what the status and /healthz say: the sum.
                    let sum = running.values.reduce(0, +)
                    announcer.announce(.leader(term: sum, partitions: running.keys.sorted()))
                    health.role = .leader(term: sum, online: true)
                    exporter.leads(termSum: sum)
                }
            }
        }

        await withTaskGroup(of: Void.self) { group in
            // The broker's admin connection, followed for every partition here.
            if let access = shared.access {
                group.addTask {
                    var first = true
                    for await event in access.connectionEvents {
                        guard case .connected = event else { continue }
                        if first { first = false; continue }
                        shared.broadcast(.reconcileAccess)
                    }
                }
                group.addTask { [logger] in
                    while !Task.isCancelled {
                        do {
                            try await Task.sleep(for: .seconds(10))
                            shared.setKnownUsers(try await access.knownUsers())
                        } catch is CancellationError {
                            return
                        } catch {
                            logger.warning("could not read the broker's users", error: error)
                        }
                    }
                }
            }

            /// Runs partition `k`'s term, from the lease just taken to its end.
            func start(_ k: Int, _ acquired: PostgresLease.Acquired, sentAt: ContinuousClock.Instant) {
                logger.notice("took partition \(k), term \(acquired.term) (\(Self.howTaken(acquired.previous, first: "its first leader")))",
                              metadata: ["partition": "\(k)", "term": "\(acquired.term)"])
                terms.state.withLock { $0.running[k] = acquired.term }
                exporter.termStarted()
                announce()
                group.addTask { [self] in
                    let end = await leadFenced(
                        url: url, term: acquired.term, sentAt: sentAt, lease: leases[k], renewEvery: renewEvery, announcer: announcer,
                        link: link, shared: (k, shared))
                    let handedOver = terms.state.withLock { $0.handingOver.remove(k) != nil }
                    switch end {
                    case .shutdown:
                        do {
                            try await leases[k].release(term: acquired.term)
                            logger.notice("\(handedOver ? "handed partition \(k) over" : "released partition \(k)"): drained, published, lease of term \(acquired.term) released", metadata: ["partition": "\(k)"])
                        } catch {
                            logger.warning("could not release partition \(k)'s lease of term \(acquired.term) (another process takes it when it runs out): \(error)")
                        }
                    case .leaseLost(let reason):
                        exporter.termLost()
                        logger.error("lost the lease of partition \(k), term \(acquired.term): \(reason). Stopped its processing and publishing, dropped its session's connection.", metadata: ["partition": "\(k)"])
                        try? await leases[k].release(term: acquired.term)
                    case .retry(let reason):
                        exporter.termLost()
                        logger.error("gave up partition \(k)'s term \(acquired.term): \(reason)", metadata: ["partition": "\(k)"])
                        try? await leases[k].release(term: acquired.term)
                    case .failed(let error):
                        terms.state.withLock { if $0.failure == nil { $0.failure = error } }
                    }
                    terms.state.withLock { _ = $0.running.removeValue(forKey: k) }
                    announce()
                }
            }

            // Every poll: say this process is alive, count the live ones, and take or
            // hand over partitions to hold its share.
            var unreachable = false
            var brokerLost = false
            var lastShare = 0
            while true {
                if terms.state.withLock({ $0.failure }) != nil { break }
                // Cut from the broker: no heartbeat (the others stop counting this process
                // and widen their share) and no partition taken, until it answers again.
                if !link.mayLead {
                    if !brokerLost { logger.warning("not sharing partitions while the broker cannot be heard (\(link.reading)); looking again every \(poll)") }
                    brokerLost = true
                    do {
                        try await cancelWhenGracefulShutdown { try await Task.sleep(for: poll) }
                    } catch {
                        break
                    }
                    continue
                }
                if brokerLost { logger.notice("the broker answers again (\(link.reading)): sharing partitions") }
                brokerLost = false
                do {
                    let live = try await directory.heartbeat()
                    let share = (count + live - 1) / live
                    if share != lastShare || unreachable {
                        logger.info("\(live) live processes share \(count) partitions: this one's share is \(share)")
                    }
                    lastShare = share
                    unreachable = false
                    let (running, handingOver) = terms.state.withLock { ($0.running, $0.handingOver) }
                    let keeping = running.keys.filter { !handingOver.contains($0) }.sorted()
                    if keeping.count > share {
                        let give = keeping.suffix(keeping.count - share).filter { shared.handOver($0) }
                        terms.state.withLock { $0.handingOver.formUnion(give) }
                        if !give.isEmpty { logger.notice("handing over partitions \(give): \(live) processes share them now") }
                    } else if running.count < share {
                        let free = try await directory.partitionHolders()
                            .filter { ($0.holder.released || $0.holder.expiresInMs < 0) && running[$0.partition] == nil }
                            .map(\.partition).shuffled()
                        for k in free.prefix(share - running.count) {
                            let sent = ContinuousClock.now
                            if let acquired = try await leases[k].tryAcquire() { start(k, acquired, sentAt: sent) }
                        }
                    }
                } catch let error as PostgresStoreError where error.isConnectionLoss {
                    if !unreachable { logger.warning("cannot reach the database: \(error); trying again every \(poll)") }
                    unreachable = true
                } catch {
                    logger.warning("could not share the partitions: \(error)")
                }
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: poll) }
                } catch {
                    break
                }
            }
            // A shutdown (the pipelines drain on it) or a failure (they are stopped, those
            // still starting as soon as their pipelines run).
            var stopped = Set<Int>()
            while terms.state.withLock({ !$0.running.isEmpty }) {
                if terms.state.withLock({ $0.failure }) != nil {
                    for k in shared.running where !stopped.contains(k) && shared.handOver(k) { stopped.insert(k) }
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
            group.cancelAll()
        }
        health.role = .stopping
        let others = try? await directory.leave()
        await shared.access?.stop()
        await closeLeases()
        await announcer.stop()
        if let failure = terms.state.withLock({ $0.failure }) {
            logger.critical("stopping after an error", error: failure)
            throw failure
        }
        logger.info("stopped cleanly\(others.map { $0 > 0 ? "; \($0) other processes take the partitions" : "" } ?? "")")
    }
}
#endif
