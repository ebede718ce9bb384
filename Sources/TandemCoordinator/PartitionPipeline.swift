import Logging
import ServiceLifecycle
import TandemCore
import TandemEngine
import TandemMQTT
import TandemStore

/// One partition's pipeline for one term: it feeds the ``LeaderLoop`` what happens and
/// carries out what the loop answers, until the loop stops. Every decision is the loop's;
/// this type only turns messages, commits, timers, the lease and the connection into
/// inputs, and actions into I/O: commits on `store`, publications through `client`,
/// queries and id checks on `reader`, wakes on `thread`'s timers.
///
/// It runs on `thread`, the partition's ``PollLoop`` (the task that runs it prefers the
/// loop as its executor), and is used by that task alone; the tasks it starts beside it
/// (queries, id checks, the connection's events, metrics ticks, the WAL checkpointer)
/// reach it only through `feed`.
final class PartitionPipeline {
    typealias Input = CoordinatorService.Input

    let service: CoordinatorService
    let partition: Int
    /// What the process's partitions share: which sessions are up, the skipped counts,
    /// the broadcast of access events.
    let partitions: PartitionGroup
    let thread: PollLoop
    let client: MQTTClient
    let store: any CoordinatorStore
    let reader: any CoordinatorStore
    let feed: AsyncStream<Input>.Continuation
    let startedAt: Millis
    let term: Int64
    let fence: LeaseFence?
    /// SQLite's WAL upkeep (the first partition's pipeline runs it), nil otherwise.
    let checkpointer: WALCheckpointer?
    let access: BrokerAccessAdmin?
    let knownUsers: Set<String>?
    /// With partitions shared between processes: what this process's leaders share.
    let shared: SharedPartitions?

    /// The commit being carried out for the loop (one at a time).
    struct CommitInFlight {
        var events: Int
        var started: ContinuousClock.Instant
        /// nil when the commit succeeded, else its error.
        var task: Task<(any Error)?, Never>
    }

    private(set) var loop: LeaderLoop
    private let timer: DeadlineTimer
    /// What the broker said of the session at its last CONNACK (logged at a reconnect).
    private var sessionPresent = false
    private var inFlight: CommitInFlight?
    private var commitError: (any Error)?
    private var stop: LeaderLoop.Stop?
    /// Queries leave the pipeline here: answered one after another from the reader's own
    /// connection, while the pipeline goes on with everyone's events.
    private let queries = AsyncStream.makeStream(of: Engine.Query.self)
    /// Resends of ids remembered only as digests: confirmed by the reader, off the pipeline.
    private let idChecks = AsyncStream.makeStream(of: Engine.IdCheck.self)

    private var logger: Logger { service.logger }
    private var clock: CoordinatorClock { service.clock }
    private var topics: Topics { service.topics }

    init(
        service: CoordinatorService, partition: Int, group: PartitionGroup, loop: consuming LeaderLoop, thread: PollLoop,
        client: MQTTClient, store: any CoordinatorStore, reader: any CoordinatorStore, feed: AsyncStream<Input>.Continuation,
        startedAt: Millis, term: Int64, fence: LeaseFence?, checkpointer: WALCheckpointer?, access: BrokerAccessAdmin?,
        knownUsers: Set<String>?, shared: SharedPartitions?
    ) {
        self.service = service
        self.partition = partition
        self.partitions = group
        self.loop = loop
        self.thread = thread
        self.client = client
        self.store = store
        self.reader = reader
        self.feed = feed
        self.startedAt = startedAt
        self.term = term
        self.fence = fence
        self.checkpointer = checkpointer
        self.access = access
        self.knownUsers = knownUsers
        self.shared = shared
        self.timer = DeadlineTimer(feed: feed, clock: service.clock, loop: thread)
    }

    /// Runs until the loop stops: `.shutdown` drained, `.leaseLost` with nothing more
    /// committed or published. Throws a commit's error (the process stops).
    func run(inputs: AsyncStream<Input>) async throws -> CoordinatorService.TermEnd {
        let feed = self.feed
        fence?.whenLost { reason in feed.yield(.leaseLost(reason)) }
        // An idle pipeline wakes at each renewal, which reaches the loop before the tick.
        fence?.whenRenewed { feed.yield(.tick) }
        let (queries, idChecks) = (self.queries.stream, self.idChecks.stream)
        let metricsInterval = Duration.milliseconds(service.configuration.metricsIntervalMs)
        let (service, client, reader, logger) = (self.service, self.client, self.reader, self.logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in client.events { feed.yield(.connection(event)) }
            }
            // Queries and id checks off the pipeline's thread (the group's tasks would
            // otherwise prefer it): a page of history is built and sent beside the
            // pipeline, never between two of its turns.
            group.addTask(executorPreference: globalConcurrentExecutor) {
                for await query in queries where await !service.answer(query, store: reader, client: client) {
                    feed.yield(.queryFailed)
                }
            }
            group.addTask(executorPreference: globalConcurrentExecutor) {
                for await check in idChecks {
                    do {
                        feed.yield(.idChecked(check, .success(try await reader.seenId(user: check.user, id: check.id))))
                    } catch {
                        feed.yield(.idChecked(check, .failure(error)))
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: metricsInterval)
                    feed.yield(.metricsTick)
                }
            }
            if let checkpointer {
                group.addTask { try await CoordinatorService.checkpoint(checkpointer, logger: logger) }
            }
            let accessTasks = followAccess()
            defer {
                group.cancelAll()
                for task in accessTasks { task.cancel() }
            }

            await withGracefulShutdownHandler {
                // Work may be due before any message arrives (the republishing after a
                // start, leases that ran out while we were down).
                carryOut(loop.start(at: clock.now()))
                var leaseDeadline = fence?.deadline
                for await input in inputs {
                    let now = clock.now()
                    // A renewal reaches the loop before the input that follows it, not
                    // behind a backlog in the stream.
                    if let fence, case let renewal = fence.renewal, renewal.deadline != leaseDeadline {
                        leaseDeadline = renewal.deadline
                        carryOut(loop.receive(.leaseRenewed(sentAt: clock.tick(at: renewal.sentAt), until: clock.tick(at: renewal.deadline)), at: now))
                    }
                    handle(input, at: now)
                    // The fence also closes the MQTT gate on its own thread; the loop
                    // hears of a loss its deadline has not shown yet.
                    if stop == nil, let fence, !fence.holds {
                        carryOut(loop.receive(.leaseLost(fence.lostReason ?? .deadlinePassed(byMs: 0)), at: now))
                    }
                    if stop != nil { break }
                }
            } onGracefulShutdown: {
                feed.yield(.shutdown)
            }
            // A commit still running (the lease was lost under it): wait for it, the
            // store must not close under it; nothing it produced is published.
            if let running = inFlight { _ = await running.task.value }
            switch stop {
            case .shutdown, nil:
                return .shutdown
            case .leaseLost(let loss):
                return .leaseLost(loss)
            case .commitFailed:
                throw commitError ?? CancellationError()
            }
        }
    }

    /// The broker's admin connection, followed beside the term and not awaited when it
    /// ends: an exchange with the broker waits up to its answer timeout, and a lost lease
    /// must end the term at once. Followed by the first partition, for all (with shared
    /// partitions, by the process: ``SharedPartitions``).
    private func followAccess() -> [Task<Void, Never>] {
        guard let access, shared == nil, partition == partitions.first else { return [] }
        let (partitions, logger, configuration, knownUsers) = (self.partitions, self.logger, service.configuration, self.knownUsers)
        return [
            Task {
                var first = true
                for await event in access.connectionEvents {
                    guard case .connected = event else { continue }
                    if first { first = false; continue }
                    partitions.broadcast(.reconcileAccess)
                }
            },
            // Users an operator added at run time can be invited within seconds.
            Task {
                var known = knownUsers
                while !Task.isCancelled {
                    do {
                        try await Task.sleep(for: .seconds(10))
                        let users = try await access.knownUsers()
                        partitions.broadcast(.knownUsers(users))
                        // With partitions, a new user gets each partition's first role.
                        if configuration.engine.partitioning.count > 1, !users.isSubset(of: known ?? []) {
                            partitions.broadcast(.reconcileAccess)
                        }
                        known = users
                    } catch is CancellationError {
                        return
                    } catch {
                        logger.warning("could not read the broker's users", error: error)
                    }
                }
            },
        ]
    }

    /// One input: the loop's answer carried out, or (connection, metrics, access) what
    /// the pipeline does around the loop.
    private func handle(_ input: Input, at now: Engine.Now) {
        switch input {
        case .message(let message):
            carryOut(loop.receive(.message(topic: message.topic, payload: message.payload), at: now))
        case .committed(let failure):
            guard let done = inFlight else { break }
            inFlight = nil
            if let failure {
                service.exporter.storeFailed(.commit)
                commitError = failure
                carryOut(loop.receive(.commitFailed, at: now))
            } else {
                // The commit's time includes the wait on the store's executor.
                let elapsed = ContinuousClock.now - done.started
                service.exporter.committed(after: elapsed, events: done.events)
                carryOut(loop.receive(.committed(elapsed: elapsed), at: now))
            }
        case .idChecked(let check, .success(let firstCopy)):
            carryOut(loop.receive(.idChecked(check, firstCopy: firstCopy), at: now))
        case .idChecked(let check, .failure(let error)):
            logger.warning("could not check a remembered id", error: error, metadata: ["user": "\(check.user)", "id": "\(check.id)"])
            carryOut(loop.receive(.idCheckFailed(check), at: now))
        case .queryFailed:
            carryOut(loop.receive(.queryFailed, at: now))
        case .roomLoaded(let request, let load):
            carryOut(loop.receive(.roomLoaded(request, load), at: now))
        case .knownUsers(let users):
            carryOut(loop.receive(.knownUsers(users), at: now))
        case .tick:
            carryOut(loop.receive(.tick, at: now))
        case .shutdown:
            logger.info("shutting down: draining")
            carryOut(loop.receive(.shutdown, at: now))
        case .leaseLost(let loss):
            carryOut(loop.receive(.leaseLost(loss), at: now))
        case .reconcileAccess:
            if access != nil { carryOut(loop.receive(.accessMayDiffer, at: now)) }
        case .connection(.connected(let sessionPresent)):
            self.sessionPresent = sessionPresent
            carryOut(loop.receive(.sessionConnected, at: now))
        case .connection(.disconnected(let reason)):
            partitions.disconnected(partition)
            shared?.disconnected(partition)
            service.connectionChanged(up: false)
            logger.warning("MQTT connection lost", metadata: ["reason": "\(reason)", "partition": "\(partition)"])
        case .metricsTick:
            observeMetrics()
            carryOut(loop.receive(.metricsTick(publisher: shared?.lowestRunning ?? partitions.first), at: now))
        }
    }

    /// The lowest partition publishes the process's metrics: the sums, and each one's own
    /// figures as of its last tick or publication.
    private func publishMetrics() {
        let uptime = Double(clock.tick() - clock.anchorWall) / 1000
        let metrics = Metrics.publication(topics: topics, partitions: service.exporter.partitions(), uptimeSeconds: uptime)
        client.enqueueLogged(metrics.topic, payload: metrics.payload, qos: .atMostOnce, retain: true, logger: logger)
        service.exporter.mirror()
    }

    /// This partition's roles, with its rooms (`desired`: the engine's readers).
    private func reconcileAccess(_ desired: [String: Set<String>]) {
        guard let access else { return }
        let (service, partition) = (self.service, self.partition)
        Task {
            await service.reconcile(desired, on: access, partition: service.accessPartition(partition),
                                    reason: "the admin connection came back, or the broker refused a change")
        }
    }

    private func sessionUp(reconnect: Bool) {
        // Online (health, the connected gauge, the status) only while every partition's
        // session is up; with shared partitions, every partition this process leads.
        let allUp = partitions.connected(partition) && shared?.connected(partition) ?? true
        service.connectionChanged(up: allUp, reconnect: reconnect)
        // The first is the connect() in lead, after which the status was published.
        guard reconnect else { return }
        logger.info("MQTT reconnected", metadata: ["mqtt.session_present": "\(sessionPresent)", "partition": "\(partition)"])
        // A will may have marked us offline while the connection was down.
        let (service, client, topics, logger, startedAt, term) = (self.service, self.client, self.topics, self.logger, self.startedAt, self.term)
        if let shared {
            let partition = self.partition
            Task {
                try? await shared.ready(partition, term: term) { sum in
                    client.enqueueLogged(topics.coordinatorStatus, payload: service.onlinePayload(startedAt: startedAt, term: sum), retain: true, logger: logger)
                }
            }
        } else if allUp {
            client.enqueueLogged(topics.coordinatorStatus, payload: service.onlinePayload(startedAt: startedAt, term: term), retain: true, logger: logger)
        }
    }

    /// The engine's counts for the exporter, with what the session's filter left.
    private func observeMetrics() {
        loop.engine.metrics.messagesElsewhere += partitions.takeSkipped(partition)
        service.exporter.observe(metrics: loop.engine.metrics, gauges: loop.engine.gauges, partition: partition)
    }

    /// The loop's actions, carried out in order.
    private func carryOut(_ actions: [LeaderLoop.Action]) {
        for action in actions {
            switch action {
            case .publish(let publications):
                observeMetrics()
                service.send(publications, via: client, metrics: &loop.engine.metrics)
            case .commit(let commit):
                inFlight = CommitInFlight(events: commit.batch.events.count, started: .now, task: startCommit(commit))
            case .query(let query):
                queries.continuation.yield(query)
            case .checkId(let check):
                idChecks.continuation.yield(check)
            case .loadRoom(let request):
                loadRoom(request)
            case .wake(let deadline):
                timer.schedule(at: deadline)
            case .stop(let reason):
                stop = reason
            case .sessionUp(let reconnect):
                sessionUp(reconnect: reconnect)
            case .reconcileAccess(let desired):
                reconcileAccess(desired)
            case .publishMetrics:
                publishMetrics()
            }
        }
    }

    /// A restore's room at its version, read from the history off the pipeline's thread
    /// (the partition waits for it: a restore is rare, and the read is a checkpoint and
    /// at most ``RoomHistory/checkpointInterval`` rows).
    private func loadRoom(_ request: RoomVersionRequest) {
        let (reader, feed, logger) = (self.reader, self.feed, self.logger)
        Task(executorPreference: globalConcurrentExecutor) {
            do {
                let stickers = try await reader.roomStickers(room: request.roomId, at: request.version)
                feed.yield(.roomLoaded(request, stickers.map(Engine.RoomLoad.stickers) ?? .gone))
            } catch {
                logger.error("could not read a room's history for a restore", error: error, metadata: [
                    "room": "\(request.roomId)", "version": "\(request.version)",
                ])
                feed.yield(.roomLoaded(request, .failed))
            }
        }
    }

    /// The commit as a task of its own on the pipeline's thread (where SQLite's writer
    /// also runs); its end comes back as `.committed`.
    private func startCommit(_ commit: LeaderLoop.Commit) -> Task<(any Error)?, Never> {
        let (service, store, access, fence, feed, partition) = (self.service, self.store, self.access, self.fence, self.feed, self.partition)
        let batch = commit.batch
        let grants = commit.access
        return Task(executorPreference: thread.taskExecutor) { () -> (any Error)? in
            do {
                try await store.commit(batch)
                // Read rights change before the step is published: an invitee can read
                // the snapshot that shows it.
                if let access, !grants.isEmpty, fence?.holds ?? true,
                   await !service.apply(grants, on: access, partition: service.accessPartition(partition)) {
                    feed.yield(.reconcileAccess)
                }
                feed.yield(.committed(nil))
                return nil
            } catch {
                feed.yield(.committed(error))
                return error
            }
        }
    }
}
