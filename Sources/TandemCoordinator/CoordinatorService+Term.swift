import Logging
import ServiceLifecycle
import Synchronization
import TandemCore
import TandemEngine
import TandemMQTT
import TandemStore

/// What a leader does while it leads: recover the state, connect with the shared client
/// id, go online, run the pipeline, and on a shutdown drain it.
extension CoordinatorService {
    enum Input: Sendable {
        case message(MQTTMessage)
        case connection(MQTTConnectionEvent)
        case tick
        case metricsTick
        /// A query could not be answered from the database (counted in the metrics).
        case queryFailed
        /// The store's answer for an id remembered only as a digest (`Engine.IdCheck`).
        case idChecked(Engine.IdCheck, Result<SeenId?, any Error>)
        case shutdown
        /// The leader lease is gone (``LeaseFence``): stop at once, commit and publish nothing.
        case leaseLost(LeaseLoss)
        /// The batch in flight committed (nil) or failed.
        case committed((any Error)?)
        /// The admin connection to the broker came back, or the broker refused a step's
        /// changes: reconcile room access with the engine's.
        case reconcileAccess
        /// The broker's users, read again (an invite of anyone else is `unknown_user`).
        case knownUsers(Set<String>)
    }

    /// The commit the service is carrying out for the ``LeaderLoop`` (one at a time).
    struct CommitInFlight {
        var events: Int
        var started: ContinuousClock.Instant
        /// nil when the commit succeeded, else its error.
        var task: Task<(any Error)?, Never>
    }

    /// Leads every partition of the database with `store`, each through its own
    /// ``LeaderLoop``, reorder buffer, commits and persistent MQTT session, side by side
    /// (CONTRACT "Partitions"), until a shutdown (all drained, `.shutdown`) or until
    /// `fence` is lost (`.leaseLost`: nothing more committed or published). `fence` nil:
    /// the SQLite owner, whose term never ends. Closes the store. Throws what stops the
    /// process (a failed commit, a refused connection).
    /// `checkpointer`: SQLite's WAL upkeep, run beside the pipelines every half second.
    /// `shared`: on a database whose partitions processes share, the one partition this
    /// term leads (`store` and `fence` are that partition's) and what the process's
    /// partitions share (``SharedPartitions``); nil: this term leads every partition.
    /// `firstLoop`: the first partition's ``PollLoop`` when the caller made it (SQLite's
    /// writer runs on it); the others, and every one without it, are made here and
    /// stopped at the term's end.
    func lead(
        store: any CoordinatorStore, term: Int64, fence: LeaseFence?, checkpointer: WALCheckpointer? = nil,
        shared: (partition: Int, partitions: SharedPartitions)? = nil, firstLoop: PollLoop? = nil
    ) async throws -> TermEnd {
        let startedAt = WallClock.now()
        let count = configuration.partitioning.count
        let partitions = shared.map { [$0.partition] } ?? Array(0..<count)
        // Recovery's `now` is both clocks at once: the tick reads like the wall clock.
        let recoveredAt = clock.tick()
        let reader: any CoordinatorStore
        // Every partition's engine, built before anything connects (online means ready),
        // side by side; each task takes its own out of here, so that it is the only owner
        // of its engine's storage (no copy on its first change). What was read is let go
        // once they are built.
        let engines: EngineSlots
        let roomAccess: [String: Set<String>]
        let holds: String
        do {
            let recovered = try await Recovery.read(configuration: configuration, store: store, now: recoveredAt)
            engines = try await EngineSlots(building: partitions, rules: configuration.engine, epoch: store.epoch, recovered: recovered, now: recoveredAt)
            roomAccess = configuration.brokerAdminUsername == nil ? [:] : recovered.rooms.access
            holds = "\(recovered.rooms.live.count + recovered.rooms.packed.count) rooms, \(recovered.conversations.count) conversations, \(recovered.workouts.count) workouts"
            reader = try await store.queryReader()
        } catch {
            await store.close()
            exporter.storeFailed(.recover)
            logger.critical("cannot read the database", error: error, metadata: ["database": "\(store.location)"])
            throw error
        }
        logger.info("database open", metadata: [
            "database": "\(store.location)", "epoch": "\(store.epoch)", "partitions": "\(partitions)", "holds": "\(holds)",
        ])

        var gate: (@Sendable () -> Bool)?
        if let fence { gate = { fence.holds } }
        // One thread per partition does all of its pipeline's work: its session's socket,
        // its timers, its steps and (SQLite) its commits.
        let loops = partitions.enumerated().map { index, partition in
            index == 0 ? firstLoop ?? PollLoop(name: "pipeline-p\(partition)", turnSpacing: configuration.turnSpacing)
                : PollLoop(name: "pipeline-p\(partition)", turnSpacing: configuration.turnSpacing)
        }
        let ownLoops = firstLoop == nil ? loops : Array(loops.dropFirst())
        defer { for loop in ownLoops { loop.stop() } }
        // One persistent session per partition, each taking every inbound message and
        // keeping what hashes to it; each with a will, so that one cut off says offline.
        let clients = try partitions.enumerated().map { index, partition in
            try MQTTClient(
                configuration: MQTTConfiguration(
                    host: configuration.host,
                    port: configuration.port,
                    clientId: PartitionGroup.clientId(configuration.clientId, partition: partition, of: count),
                    username: configuration.username,
                    password: configuration.password,
                    will: MQTTWill(topic: topics.coordinatorStatus, payload: Self.offlinePayload, qos: .atLeastOnce, retain: true),
                    session: .persistent(expirySeconds: configuration.sessionExpirySeconds),
                    // Receipts and snapshots in flight at once. libmosquitto walks every
                    // message sent and not yet acknowledged on each publish and each PUBACK
                    // (message__release_to_inflight), so this bounds the cost of one
                    // publication: at 20,000, a backlog after a minute's stall kept 20,000
                    // unacknowledged and the coordinator fell to 100 events a second at
                    // full CPU, never catching up (docs/PERFORMANCE.md, "A stall under load").
                    maxInflight: 1_000,
                    receiveMaximum: 20_000,
                    tls: configuration.tls,
                    gate: gate
                ),
                loop: loops[index],
                logger: logger
            )
        }
        // Room access on the broker, when it is administered: made to match the database
        // before anything is published, each partition's roles with its own rooms.
        let access: BrokerAccessAdmin?
        let knownUsers: Set<String>?
        do {
            if let shared {
                access = shared.partitions.access
                knownUsers = shared.partitions.knownUsers
            } else {
                let started = try await startBrokerAccess(gate: gate)
                access = started?.admin
                knownUsers = started?.users
            }
            if let access {
                let partitioning = configuration.partitioning
                for partition in partitions {
                    let desired = roomAccess.mapValues { $0.filter { partitioning.partition(ofRoom: $0) == partition } }
                    try await reconcileAtStart(desired, on: access, partition: accessPartition(partition))
                }
            }
        } catch {
            await reader.close()
            await store.close()
            if error is CancellationError { return .shutdown }
            logger.critical("cannot administer room access on the broker", error: error)
            throw error
        }
        func closeAll() async {
            if shared == nil { await access?.stop() }
            for client in clients { await client.disconnect() }
            await reader.close()
            await store.close()
        }
        // The lease gone: cut the shared client ids' connections at once (no DISCONNECT,
        // so the broker publishes our will) whatever the pipelines are doing.
        fence?.whenLost { reason in
            for client in clients { client.cutOff(reason: "leader lease lost: \(reason)") }
        }

        // Each pipeline's one input stream. Inbound messages go straight into it from
        // libmosquitto's thread (no task in between). Registered before CONNECT: whatever
        // the broker queued for the session while we were down is delivered into it.
        let streams = partitions.map { _ in AsyncStream.makeStream(of: Input.self) }
        let group = PartitionGroup(partitions: partitions, feeds: streams.map(\.continuation))
        for (index, (client, stream)) in zip(clients, streams).enumerated() {
            let feed = stream.continuation
            // What another partition holds stays on this thread: no hop to the pipeline,
            // which would only count it. (With one partition the filter keeps everything.)
            var rules = configuration.engine
            rules.partition = partitions[index]
            let filter = PartitionFilter(configuration: rules)
            let skipped = group.skipped[index]
            try await client.subscribe(topics.inboundFilters, qos: .atLeastOnce) { message in
                if filter.keeps(topic: message.topic, payload: message.payload) {
                    feed.yield(.message(message))
                } else {
                    skipped.add()
                }
            }
        }
        logger.info(configuration.tls == nil ? "connecting to the MQTT broker" : "connecting to the MQTT broker over TLS", metadata: [
            "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)",
            "mqtt.username": "\(configuration.username ?? "(anonymous)")",
            "mqtt.client_id": "\(count == 1 ? configuration.clientId : "\(configuration.clientId)-p0 ... -p\(count - 1)")",
        ])
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingTaskGroup(of: Void.self) { connecting in
                    for client in clients { connecting.addTask { try await client.connect() } }
                    try await connecting.waitForAll()
                }
            }
            for partition in partitions { _ = group.connected(partition) }
            if let shared {
                // Online once every partition has a ready leader, whichever process.
                try await shared.partitions.ready(shared.partition, term: term) { [self] sum in
                    try await clients[0].publish(topics.coordinatorStatus, payload: onlinePayload(startedAt: startedAt, term: sum), qos: .atLeastOnce, retain: true)
                }
            } else {
                try await clients[0].publish(topics.coordinatorStatus, payload: onlinePayload(startedAt: startedAt, term: term), qos: .atLeastOnce, retain: true)
            }
        } catch {
            await closeAll()
            if error is CancellationError { return .shutdown }
            if let lost = fence?.lostReason { return .leaseLost(lost) }
            logger.critical("cannot connect to the broker", error: error)
            throw error
        }
        if shared == nil {
            health.role = .leader(term: term, online: true)
            exporter.leading(term: term)
        }
        logger.notice("online: leading (instance \(configuration.instanceId), term \(term), \(configuration.partitioning)); every subscription acknowledged; status published on \(topics.coordinatorStatus)", metadata: ["term": "\(term)"])

        // The partitions side by side, each on its own task; the first to fail stops the
        // others (their pipelines end at the cancellation), and the process with it.
        var end = TermEnd.shutdown
        var failure: (any Error)?
        // A partition handed over to another process drains as at a shutdown.
        if let shared {
            shared.partitions.register(shared.partition, feed: streams[0].continuation)
        }
        await withTaskGroup(of: Result<TermEnd, any Error>.self) { running in
            for (index, partition) in partitions.enumerated() {
                let client = clients[index]
                let stream = streams[index]
                // On the partition's own thread: the loop that reads its session.
                running.addTask(executorPreference: loops[index]) { [self] in
                    do {
                        var engine = engines.take(index)
                        if let knownUsers { engine.setKnownUsers(knownUsers) }
                        // Every snapshot again (the broker may have lost its retained
                        // copies, or the last leader's late copies may be there), in chunks
                        // from the pipeline's steps so that they never all sit in memory.
                        engine.startRepublishing(now: clock.tick())
                        var loop = LeaderLoop(engine: consume engine, leaseDeadline: fence.map { clock.tick(at: $0.deadline) })
                        return .success(try await pipeline(
                            partition: partition, group: group, loop: &loop, thread: loops[index], client: client, store: store, reader: reader,
                            inputs: stream.stream, feed: stream.continuation, startedAt: startedAt, term: term, fence: fence,
                            checkpointer: index == 0 ? checkpointer : nil, access: access, knownUsers: knownUsers, shared: shared?.partitions))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            for await result in running {
                switch result {
                case .success(.shutdown):
                    break
                case .success(let other):
                    if end.isShutdown { end = other }
                case .failure(let error):
                    if failure == nil { failure = error }
                    running.cancelAll()
                }
            }
        }
        if let shared {
            shared.partitions.unregister(shared.partition)
            exporter.forget(partition: shared.partition)
        } else {
            health.role = .stopping
        }
        if let failure {
            if shared == nil { exporter.stoppedLeading(lost: fence?.lostReason != nil) }
            await closeAll()
            if let lost = fence?.lostReason { return .leaseLost(lost) }
            logger.critical("stopping after an error", error: failure)
            throw failure
        }
        if shared == nil { exporter.stoppedLeading(lost: !(end.isShutdown)) }
        guard case .shutdown = end else {
            // Lost the lease: not one more commit or publication. The gate is closed, the
            // connections cut; what waits in the buffers was never acknowledged by a
            // receipt, so its senders resend it to the next leader.
            await closeAll()
            return end
        }
        // Drained by the loops: everything taken is committed and published. Offline: a
        // partition has no leader now (another process's, with its shared partitions,
        // says online again once it leads them).
        do {
            try await clients[0].publish(topics.coordinatorStatus, payload: Self.offlinePayload, qos: .atLeastOnce, retain: true)
        } catch {
            logger.warning("could not publish the offline status", error: error)
        }
        await closeAll()
        logger.info("stopped cleanly")
        return .shutdown
    }

    /// The engines of the partitions a term leads, built side by side from one reading of
    /// the store, each taken out once by the task that runs its pipeline.
    final class EngineSlots: Sendable {
        private let slots: Mutex<[Engine?]>

        init(building partitions: [Int], rules: EngineConfiguration, epoch: String, recovered: Engine.Recovered, now: Millis) async throws {
            let built = try await withThrowingTaskGroup(of: (Int, Engine).self) { group in
                for (index, partition) in partitions.enumerated() {
                    group.addTask {
                        var rules = rules
                        rules.partition = partition
                        return (index, try Engine(configuration: rules, epoch: epoch, recovered: recovered, now: now))
                    }
                }
                var built = [Engine?](repeating: nil, count: partitions.count)
                for try await (index, engine) in group { built[index] = engine }
                return built
            }
            slots = Mutex(built)
        }

        func take(_ index: Int) -> Engine {
            slots.withLock { $0[index].take()! }
        }
    }

    /// Feeds the ``LeaderLoop`` what happens and carries out what it answers, until it
    /// stops. Throws a commit's error (the process stops).
    private func pipeline(
        partition: Int, group partitions: PartitionGroup, loop: inout LeaderLoop, thread: PollLoop, client: MQTTClient, store: any CoordinatorStore, reader: any CoordinatorStore,
        inputs: AsyncStream<Input>, feed: AsyncStream<Input>.Continuation, startedAt: Millis, term: Int64,
        fence: LeaseFence?, checkpointer: WALCheckpointer?, access: BrokerAccessAdmin?, knownUsers: Set<String>?, shared: SharedPartitions?
    ) async throws -> TermEnd {
        fence?.whenLost { reason in feed.yield(.leaseLost(reason)) }
        // An idle pipeline wakes at each renewal, which reaches the loop before the tick.
        fence?.whenRenewed { feed.yield(.tick) }
        // Queries leave the pipeline here: answered one after another from the reader's
        // own connection, while the pipeline goes on with everyone's events.
        let (queries, queryFeed) = AsyncStream.makeStream(of: Engine.Query.self)
        // Resends of ids remembered only as digests: confirmed by the reader, off the pipeline.
        let (idChecks, idCheckFeed) = AsyncStream.makeStream(of: Engine.IdCheck.self)
        let metricsInterval = Duration.milliseconds(configuration.metricsIntervalMs)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in client.events { feed.yield(.connection(event)) }
            }
            group.addTask { [self] in
                for await query in queries where await !answer(query, store: reader, client: client) {
                    feed.yield(.queryFailed)
                }
            }
            group.addTask {
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
                group.addTask { [logger] in try await Self.checkpoint(checkpointer, logger: logger) }
            }
            // The broker's admin connection, followed beside the term and not awaited when
            // it ends: an exchange with the broker waits up to its answer timeout, and a
            // lost lease must end the term at once.
            var accessTasks: [Task<Void, Never>] = []
            // The broker's admin connection is followed by the first partition, for all
            // (with shared partitions, by the process: ``SharedPartitions``).
            if let access, shared == nil, partition == partitions.first {
                accessTasks.append(Task {
                    var first = true
                    for await event in access.connectionEvents {
                        guard case .connected = event else { continue }
                        if first { first = false; continue }
                        partitions.broadcast(.reconcileAccess)
                    }
                })
                // Users an operator added at run time can be invited within seconds.
                accessTasks.append(Task { [logger, configuration] in
                    var known = knownUsers
                    while !Task.isCancelled {
                        do {
                            try await Task.sleep(for: .seconds(10))
                            let users = try await access.knownUsers()
                            partitions.broadcast(.knownUsers(users))
                            // With partitions, a new user gets each partition's first role.
                            if configuration.partitioning.count > 1, !users.isSubset(of: known ?? []) {
                                partitions.broadcast(.reconcileAccess)
                            }
                            known = users
                        } catch is CancellationError {
                            return
                        } catch {
                            logger.warning("could not read the broker's users", error: error)
                        }
                    }
                })
            }
            defer {
                group.cancelAll()
                for task in accessTasks { task.cancel() }
            }

            let timer = DeadlineTimer(feed: feed, clock: clock, loop: thread)
            var connections = 0
            var inFlight: CommitInFlight?
            var commitError: (any Error)?
            var stop: LeaderLoop.Stop?

            // The engine's counts for the exporter, with what the session's filter left.
            func observeMetrics() {
                loop.engine.metrics.messagesElsewhere += partitions.takeSkipped(partition)
                exporter.observe(metrics: loop.engine.metrics, gauges: loop.engine.gauges, partition: partition)
            }

            // The loop's actions, carried out in order.
            func carryOut(_ actions: [LeaderLoop.Action]) {
                for action in actions {
                    switch action {
                    case .publish(let publications):
                        observeMetrics()
                        send(publications, via: client, metrics: &loop.engine.metrics)
                    case .commit(let commit):
                        let batch = commit.batch
                        let grants = commit.access
                        // On the pipeline's thread (where SQLite's writer also runs).
                        let task = Task(executorPreference: thread) { [self] () -> (any Error)? in
                            do {
                                try await store.commit(batch)
                                // Read rights change before the step is published: an
                                // invitee can read the snapshot that shows it.
                                if let access, !grants.isEmpty, fence?.holds ?? true, await !apply(grants, on: access, partition: accessPartition(partition)) {
                                    feed.yield(.reconcileAccess)
                                }
                                feed.yield(.committed(nil))
                                return nil
                            } catch {
                                feed.yield(.committed(error))
                                return error
                            }
                        }
                        inFlight = CommitInFlight(events: batch.events.count, started: .now, task: task)
                    case .query(let query):
                        queryFeed.yield(query)
                    case .checkId(let check):
                        idCheckFeed.yield(check)
                    case .wake(let deadline):
                        timer.schedule(at: deadline)
                    case .stop(let reason):
                        stop = reason
                    }
                }
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
                    switch input {
                    case .message(let message):
                        carryOut(loop.receive(.message(topic: message.topic, payload: message.payload), at: now))
                    case .committed(let failure):
                        guard let done = inFlight else { break }
                        inFlight = nil
                        if let failure {
                            exporter.storeFailed(.commit)
                            commitError = failure
                            carryOut(loop.receive(.commitFailed, at: now))
                        } else {
                            // The commit's time includes the wait on the store's executor.
                            let elapsed = ContinuousClock.now - done.started
                            exporter.committed(after: elapsed, events: done.events)
                            carryOut(loop.receive(.committed(elapsed: elapsed), at: now))
                        }
                    case .idChecked(let check, .success(let firstCopy)):
                        carryOut(loop.receive(.idChecked(check, firstCopy: firstCopy), at: now))
                    case .idChecked(let check, .failure(let error)):
                        logger.warning("could not check a remembered id", error: error, metadata: ["user": "\(check.user)", "id": "\(check.id)"])
                        carryOut(loop.receive(.idCheckFailed(check), at: now))
                    case .queryFailed:
                        carryOut(loop.receive(.queryFailed, at: now))
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
                        // This partition's roles, with its rooms.
                        if let access {
                            let desired = loop.engine.roomAccess
                            Task { [self] in
                                await reconcile(desired, on: access, partition: accessPartition(partition),
                                                reason: "the admin connection came back, or the broker refused a change")
                            }
                        }
                    case .connection(.connected(let sessionPresent)):
                        connections += 1
                        // Online (health, the connected gauge, the status) only while every
                        // partition's session is up.
                        // With shared partitions, every partition this process leads.
                        let allUp = partitions.connected(partition) && shared?.connected(partition) ?? true
                        connectionChanged(up: allUp, reconnect: connections > 1)
                        // The first is the connect() in lead, after which the status was published.
                        guard connections > 1 else { break }
                        logger.info("MQTT reconnected", metadata: ["mqtt.session_present": "\(sessionPresent)", "partition": "\(partition)"])
                        // A will may have marked us offline while the connection was down.
                        if let shared {
                            Task { [self] in
                                try? await shared.ready(partition, term: term) { sum in
                                    client.enqueueLogged(topics.coordinatorStatus, payload: onlinePayload(startedAt: startedAt, term: sum), retain: true, logger: logger)
                                }
                            }
                        } else if allUp {
                            client.enqueueLogged(topics.coordinatorStatus, payload: onlinePayload(startedAt: startedAt, term: term), retain: true, logger: logger)
                        }
                    case .connection(.disconnected(let reason)):
                        partitions.disconnected(partition)
                        shared?.disconnected(partition)
                        connectionChanged(up: false)
                        logger.warning("MQTT connection lost", metadata: ["reason": "\(reason)", "partition": "\(partition)"])
                    case .metricsTick:
                        observeMetrics()
                        // The first partition publishes them all: the sums, and each one's
                        // own figures as of its last tick or publication.
                        guard shared?.publishesMetrics(partition) ?? (partition == partitions.first) else { break }
                        let metrics = Metrics.publication(
                            topics: topics, partitions: exporter.partitions(), uptimeSeconds: Double(now.tick - clock.anchorWall) / 1000)
                        client.enqueueLogged(metrics.topic, payload: metrics.payload, qos: .atMostOnce, retain: true, logger: logger)
                        exporter.mirror()
                    }
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

    /// SQLite's WAL upkeep beside the pipeline: a ``WALCheckpointer`` pass every half second.
    static func checkpoint(_ wal: WALCheckpointer, logger: Logger) async throws {
        var wal = wal
        while !Task.isCancelled {
            try await Task.sleep(for: .milliseconds(500))
            do {
                let pass = try await wal.pass()
                if pass.restartTried, !pass.restarted, pass.failedRestarts.isMultiple(of: 5) {
                    logger.warning("the WAL cannot be started over: a reader holds a transaction open, or another process checkpoints",
                                   metadata: ["wal.frames": "\(pass.walFrames)", "tries": "\(pass.failedRestarts)"])
                }
            } catch {
                logger.warning("WAL checkpoint failed", error: error)
            }
        }
    }

    func send(_ publications: [Publication], via client: MQTTClient, metrics: inout Metrics) {
        let now = clock.tick()
        for p in publications {
            sending(p, now: now)
            do {
                try client.enqueue(p.topic, payload: p.payload, qos: p.qos == 0 ? .atMostOnce : .atLeastOnce, retain: p.retain)
                metrics.messagesOut += 1
            } catch {
                metrics.publishErrors += 1
                // A packet the broker's max_packet_size refuses (MOSQ_ERR_OVERSIZE_PACKET)
                // would leave a retained state behind for good: say so.
                if error.isOversizePacket, !oversizeReported.exchange(true, ordering: .relaxed) {
                    logger.error("publication refused: \(p.payload.count) bytes is more than the broker's max_packet_size allows (said once; publishErrors counts every one)", metadata: ["topic": "\(p.topic)"])
                } else {
                    logger.debug("publish failed", error: error, metadata: ["topic": "\(p.topic)"])
                }
            }
        }
    }
}
