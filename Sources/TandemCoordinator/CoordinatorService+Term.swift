import Logging
import ServiceLifecycle
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

    /// Leads with `store` until a shutdown (drained, `.shutdown`) or until `fence` is
    /// lost (`.leaseLost`: nothing more committed or published). `fence` nil: the
    /// SQLite owner, whose term never ends. Closes the store. Throws what stops the
    /// process (a failed commit, a refused connection).
    /// `checkpointer`: SQLite's WAL upkeep, run beside the pipeline every half second.
    func lead(store: any CoordinatorStore, term: Int64, fence: LeaseFence?, checkpointer: WALCheckpointer? = nil) async throws -> TermEnd {
        let startedAt = WallClock.now()
        var engine: Engine
        // Recovery's `now` is both clocks at once: the tick reads like the wall clock.
        let recoveredAt = clock.tick()
        let reader: any CoordinatorStore
        do {
            engine = try await Recovery.engine(configuration: configuration, store: store, now: recoveredAt)
            reader = try await store.queryReader()
        } catch {
            await store.close()
            exporter.storeFailed(.recover)
            logger.critical("cannot read the database", error: error, metadata: ["database": "\(store.location)"])
            throw error
        }
        logger.info("database open", metadata: ["database": "\(store.location)", "epoch": "\(engine.epoch)", "holds": "\(engine.summaryLine)"])

        var gate: (@Sendable () -> Bool)?
        if let fence { gate = { fence.holds } }
        let client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: configuration.host,
                port: configuration.port,
                clientId: configuration.clientId,
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
            logger: logger
        )
        // Room access on the broker, when it is administered: made to match the database
        // before anything is published.
        let access: BrokerAccessAdmin?
        do {
            access = try await startBrokerAccess(engine: &engine, gate: gate)
        } catch {
            await reader.close()
            await store.close()
            if error is CancellationError { return .shutdown }
            logger.critical("cannot administer room access on the broker", error: error)
            throw error
        }
        func closeAll() async {
            await access?.stop()
            await client.disconnect()
            await reader.close()
            await store.close()
        }
        // The lease gone: cut the shared client id's connection at once (no DISCONNECT,
        // so the broker publishes our will) whatever the pipeline is doing.
        fence?.whenLost { reason in client.cutOff(reason: "leader lease lost: \(reason)") }

        // The pipeline's one input stream. Inbound messages go straight into it from
        // libmosquitto's thread (no task in between). Registered before CONNECT: whatever
        // the broker queued for our session while we were down is delivered into it.
        let (inputs, feed) = AsyncStream.makeStream(of: Input.self)
        try await client.subscribe(topics.inboundFilters, qos: .atLeastOnce) { message in
            feed.yield(.message(message))
        }
        logger.info(configuration.tls == nil ? "connecting to the MQTT broker" : "connecting to the MQTT broker over TLS", metadata: [
            "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)",
            "mqtt.username": "\(configuration.username ?? "(anonymous)")", "mqtt.client_id": "\(configuration.clientId)",
        ])
        do {
            try await cancelWhenGracefulShutdown { try await client.connect() }
            try await client.publish(topics.coordinatorStatus, payload: onlinePayload(startedAt: startedAt, term: term), qos: .atLeastOnce, retain: true)
        } catch {
            await closeAll()
            if error is CancellationError { return .shutdown }
            if let lost = fence?.lostReason { return .leaseLost(lost) }
            logger.critical("cannot connect to the broker", error: error)
            throw error
        }
        health.role = .leader(term: term, online: true)
        exporter.leading(term: term)
        logger.notice("online: leading (instance \(configuration.instanceId), term \(term)); every subscription acknowledged; status published on \(topics.coordinatorStatus)", metadata: ["term": "\(term)"])
        // Every snapshot again (the broker may have lost its retained copies, or the last
        // leader's late copies may be there), in chunks from the pipeline's steps so that
        // they never all sit in memory at once.
        engine.startRepublishing(now: clock.tick())
        var loop = LeaderLoop(engine: consume engine, leaseDeadline: fence.map { clock.tick(at: $0.deadline) })

        var end = TermEnd.shutdown
        do {
            end = try await pipeline(
                loop: &loop, client: client, store: store, reader: reader, inputs: inputs, feed: feed,
                startedAt: startedAt, term: term, fence: fence, checkpointer: checkpointer, access: access)
        } catch {
            health.role = .stopping
            exporter.stoppedLeading(lost: fence?.lostReason != nil)
            await closeAll()
            if let lost = fence?.lostReason { return .leaseLost(lost) }
            logger.critical("stopping after an error", error: error)
            throw error
        }
        health.role = .stopping
        exporter.stoppedLeading(lost: !(end.isShutdown))
        guard case .shutdown = end else {
            // Lost the lease: not one more commit or publication. The gate is closed, the
            // connection cut; what waits in the buffer was never acknowledged by a
            // receipt, so its senders resend it to the next leader.
            await closeAll()
            return end
        }
        // Drained by the loop: everything taken is committed and published.
        do {
            try await client.publish(topics.coordinatorStatus, payload: Self.offlinePayload, qos: .atLeastOnce, retain: true)
        } catch {
            logger.warning("could not publish the offline status", error: error)
        }
        await closeAll()
        logger.info("stopped cleanly")
        return .shutdown
    }

    /// Feeds the ``LeaderLoop`` what happens and carries out what it answers, until it
    /// stops. Throws a commit's error (the process stops).
    private func pipeline(
        loop: inout LeaderLoop, client: MQTTClient, store: any CoordinatorStore, reader: any CoordinatorStore,
        inputs: AsyncStream<Input>, feed: AsyncStream<Input>.Continuation, startedAt: Millis, term: Int64,
        fence: LeaseFence?, checkpointer: WALCheckpointer?, access: BrokerAccessAdmin?
    ) async throws -> TermEnd {
        fence?.whenLost { reason in feed.yield(.leaseLost(reason)) }
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
            if let access {
                accessTasks.append(Task {
                    var first = true
                    for await event in access.connectionEvents {
                        guard case .connected = event else { continue }
                        if first { first = false; continue }
                        feed.yield(.reconcileAccess)
                    }
                })
                // Users an operator added at run time can be invited within seconds.
                accessTasks.append(Task { [logger] in
                    while !Task.isCancelled {
                        do {
                            try await Task.sleep(for: .seconds(10))
                            feed.yield(.knownUsers(try await access.knownUsers()))
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

            let timer = DeadlineTimer(feed: feed, clock: clock)
            var connections = 0
            var inFlight: CommitInFlight?
            var commitError: (any Error)?
            var stop: LeaderLoop.Stop?

            // The loop's actions, carried out in order.
            func carryOut(_ actions: [LeaderLoop.Action]) {
                for action in actions {
                    switch action {
                    case .publish(let publications):
                        exporter.observe(metrics: loop.engine.metrics, gauges: loop.engine.gauges)
                        send(publications, via: client, metrics: &loop.engine.metrics)
                    case .commit(let commit):
                        let batch = commit.batch
                        let grants = commit.access
                        let task = Task { [self] () -> (any Error)? in
                            do {
                                try await store.commit(batch)
                                // Read rights change before the step is published: an
                                // invitee can read the snapshot that shows it.
                                if let access, !grants.isEmpty, fence?.holds ?? true, await !apply(grants, on: access) {
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
                        if let access {
                            let desired = loop.engine.roomAccess
                            Task { [self] in await reconcile(desired, on: access, reason: "the admin connection came back, or the broker refused a change") }
                        }
                    case .connection(.connected(let sessionPresent)):
                        connections += 1
                        connectionChanged(up: true, reconnect: connections > 1)
                        // The first is the connect() above, which published the status already.
                        guard connections > 1 else { break }
                        logger.info("MQTT reconnected", metadata: ["mqtt.session_present": "\(sessionPresent)"])
                        // A will may have marked us offline while the connection was down.
                        client.enqueueLogged(topics.coordinatorStatus, payload: onlinePayload(startedAt: startedAt, term: term), retain: true, logger: logger)
                    case .connection(.disconnected(let reason)):
                        connectionChanged(up: false)
                        logger.warning("MQTT connection lost", metadata: ["reason": "\(reason)"])
                    case .metricsTick:
                        let metrics = loop.engine.metricsPublication(uptimeSeconds: Double(now.tick - clock.anchorWall) / 1000)
                        client.enqueueLogged(metrics.topic, payload: metrics.payload, qos: .atMostOnce, retain: true, logger: logger)
                        exporter.observe(metrics: loop.engine.metrics, gauges: loop.engine.gauges)
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
                logger.debug("publish failed", error: error, metadata: ["topic": "\(p.topic)"])
            }
        }
    }
}
