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
        /// A room at a version, read from the history for a restore (`LeaderLoop.Action.loadRoom`).
        case roomLoaded(RoomVersionRequest, Engine.RoomLoad)
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
        let count = configuration.engine.partitioning.count
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
        let loops = try partitions.enumerated().map { index, partition in
            try (index == 0 ? firstLoop : nil) ?? PollLoop(name: "pipeline-p\(partition)", turnSpacing: configuration.turnSpacing)
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
                let partitioning = configuration.engine.partitioning
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
        logger.notice("online: leading (instance \(configuration.instanceId), term \(term), \(configuration.engine.partitioning)); every subscription acknowledged; status published on \(topics.coordinatorStatus)", metadata: ["term": "\(term)"])

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
                running.addTask(executorPreference: loops[index].taskExecutor) { [self] in
                    do {
                        var engine = engines.handOut(index)
                        if let knownUsers { engine.setKnownUsers(knownUsers) }
                        // Every snapshot again (the broker may have lost its retained
                        // copies, or the last leader's late copies may be there), in chunks
                        // from the pipeline's steps so that they never all sit in memory.
                        engine.startRepublishing(now: clock.tick())
                        let pipeline = PartitionPipeline(
                            service: self, partition: partition, group: group,
                            loop: LeaderLoop(engine: consume engine, leaseDeadline: fence.map { clock.tick(at: $0.deadline) }),
                            thread: loops[index], client: client, store: store, reader: reader, feed: stream.continuation,
                            startedAt: startedAt, term: term, fence: fence, checkpointer: index == 0 ? checkpointer : nil,
                            access: access, knownUsers: knownUsers, shared: shared?.partitions)
                        return .success(try await pipeline.run(inputs: stream.stream))
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

        /// Partition `index`'s engine, handed out once (its slot is emptied).
        func handOut(_ index: Int) -> Engine {
            slots.withLock { $0[index].take()! }
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
