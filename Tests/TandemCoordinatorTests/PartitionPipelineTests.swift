import Foundation
import Logging
import Synchronization
import Testing
import TandemCore
import TandemEngine
import TandemMQTT
import TandemStore
import TestSupport
@testable import TandemCoordinator

/// One partition's pipeline on its own thread, with the real parts around it: a
/// mosquitto, a SQLite file whose writer runs on the pipeline's `PollLoop`, the session
/// that loop drives. What the coordinator process adds (recovery, the status, the
/// partitions) is left out: the pipeline is made here as `lead` makes it.
@Suite(.serialized) struct PartitionPipelineTests {
    struct Parts {
        let thread: PollLoop
        let service: CoordinatorService
        let store: SQLiteStore
        let client: MQTTClient
        let feed: AsyncStream<CoordinatorService.Input>.Continuation
        let running: Task<CoordinatorService.TermEnd, any Error>
        let directory: String

        func close() async {
            await client.disconnect()
            await store.close()
            thread.stop()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    static func start(broker: MosquittoBroker, reorderWindowMs: Millis) async throws -> Parts {
        let directory = try makeTemporaryDirectory(prefix: "pipeline")
        let thread = try PollLoop(name: "test-pipeline")
        let store = try SQLiteStore.open(path: directory + "/tandem.sqlite", checkpoints: .separate, executor: thread)
        let reader = try store.queryReader()
        var configuration = CoordinatorConfiguration()
        configuration.host = broker.host
        configuration.port = broker.port
        configuration.clientId = "pipeline-\(UInt32.random(in: 0...UInt32.max))"
        configuration.engine.reorderWindowMs = reorderWindowMs
        let service = CoordinatorService(configuration: configuration, logger: Logger(label: "tandem.test.pipeline"))
        let client = try MQTTClient(
            configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientId: configuration.clientId), loop: thread)
        let (inputs, feed) = AsyncStream.makeStream(of: CoordinatorService.Input.self)
        let group = PartitionGroup(partitions: [0], feeds: [feed])
        try await client.subscribe(service.topics.inboundFilters, qos: .atLeastOnce) { message in
            feed.yield(.message(message))
        }
        try await client.connect()
        _ = group.connected(0)
        let engine = Engine(configuration: configuration.engine, epoch: store.epoch, now: service.clock.tick())
        let pipeline = PartitionPipeline(
            service: service, partition: 0, group: group, loop: LeaderLoop(engine: engine), thread: thread, client: client,
            store: store, reader: reader, feed: feed, startedAt: WallClock.now(), term: 0, fence: nil, checkpointer: nil,
            access: nil, knownUsers: nil, shared: nil)
        let running = Task(executorPreference: thread.taskExecutor) { try await pipeline.run(inputs: inputs) }
        return Parts(thread: thread, service: service, store: store, client: client, feed: feed, running: running, directory: directory)
    }

    @Test(.timeLimit(.minutes(1)))
    func anEventIsOrderedCommittedAndAnsweredAndAShutdownDrainsTheWindow() async throws {
        try await withBroker(.open) { broker in
            // A long window, so that an event is still waiting in it when the shutdown comes.
            let parts = try await Self.start(broker: broker, reorderWindowMs: 1_500)
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let started = ContinuousClock.now
            try await alice.edit(room: "r", .edit("c1", "create", sticker: "s1", image: "a.png", frame: (0, 0, 10, 10)))
            let created = try await alice.receipt("c1")
            #expect(created["status"] == "accepted" && created["version"]?.int64Value == 1, "\(created.text)")
            // Not before its window passed.
            #expect(ContinuousClock.now - started >= .milliseconds(1_400))
            let state = try await alice.roomState("r", version: 1)
            #expect(state["stickers"] != nil, "\(state.text)")

            // In the window when the shutdown comes: committed and answered by the drain.
            try await alice.edit(room: "r", .edit("u2", "update", sticker: "s1", frame: (5, 5, 10, 10)))
            try await Task.sleep(for: .milliseconds(300))
            parts.feed.yield(.shutdown)
            guard case .shutdown = try await parts.running.value else {
                Issue.record("the pipeline did not end with a drained shutdown")
                return
            }
            let updated = try await alice.receipt("u2")
            #expect(updated["status"] == "accepted" && updated["version"]?.int64Value == 2, "\(updated.text)")
            // In the database: both events, and the room at version 2.
            let events = try await parts.store.eventLog(after: 0, limit: 10)
            #expect(events.map(\.id) == ["c1", "u2"])
            await alice.close()
            await parts.close()
        }
    }
}
