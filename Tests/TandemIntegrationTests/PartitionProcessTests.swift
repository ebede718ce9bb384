import Foundation
import Testing
import TandemCore
import TandemMQTT
import TestSupport

/// Issue 21: several partitions led by one process (CONTRACT "Partitions"), on the
/// shipped broker and the built coordinator, on SQLite.
@Suite(.serialized) struct PartitionProcessTests {
    /// Rooms that fall in all three of three partitions (checked below).
    static let rooms = (0..<8).map { "part-\($0)" }

    @Test(.timeLimit(.minutes(3)))
    func threePartitionsAnswerEachMessageOnceAndTheirNumberIsFixed() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--partitions", "3", "--instance-id", "three"])
            let instanceTopic = Topics().coordinatorInstance("three")
            let watcher = try await TestPeer.connect(broker: broker, user: "watcher", asCoordinatorWatcher: true, extraFilters: [instanceTopic])
            let instance = try await watcher.waitFor(instanceTopic) { $0["role"]?.stringValue == "leader" }
            #expect(instance["partitions"] == .array([0, 1, 2]))

            let partitioning = try #require(Partitioning(count: 3))
            #expect(Set(Self.rooms.map { partitioning.partition(ofRoom: $0) }) == [0, 1, 2])
            // alice's and bob's conversation is in another partition than alice's and carol's.
            #expect(partitioning.partition(ofConversation: "alice", "bob") != partitioning.partition(ofConversation: "carol", "alice"))
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            let carol = try await TestPeer.connect(broker: broker, user: "carol")
            let t = nowMillis()
            for (i, room) in Self.rooms.enumerated() {
                try await alice.edit(room: room, .edit("c\(i)", "create", sticker: "s", at: t + Int64(i), image: "a.png", frame: (0, 0, 10, 10)))
            }
            // Both sides of a conversation are answered by one partition, whoever sends.
            try await alice.dm(.obj(["commandId": "req-bob", "type": "request", "peer": "bob", "timestamp": .int(t)]))
            try await carol.dm(.obj(["commandId": "req-alice", "type": "request", "peer": "alice", "timestamp": .int(t)]))
            #expect(try await alice.receipt("req-bob")["status"] == "accepted")
            #expect(try await carol.receipt("req-alice")["status"] == "accepted")
            try await bob.dm(.obj(["commandId": "acc-alice", "type": "accept", "peer": "alice", "timestamp": .int(t + 1)]))
            try await alice.dm(.obj(["commandId": "acc-carol", "type": "accept", "peer": "carol", "timestamp": .int(t + 1)]))
            #expect(try await bob.receipt("acc-alice")["status"] == "accepted")
            #expect(try await alice.receipt("acc-carol")["status"] == "accepted")
            for i in Self.rooms.indices {
                #expect(try await alice.receipt("c\(i)")["status"] == "accepted")
            }
            for room in Self.rooms {
                let state = try await alice.roomState(room, version: 1)
                #expect(state["stickers"]?.arrayValue?.count == 1, "\(room): \(state.text)")
            }
            // A resend is a duplicate, answered by the partition that took the first copy.
            try await alice.edit(room: Self.rooms[0], .edit("c0", "create", sticker: "s", at: t, image: "a.png", frame: (0, 0, 10, 10)))
            #expect(try await alice.receipt("c0", count: 2)["status"] == "duplicate")

            // The metrics: the sums, and each partition's own figures.
            let metrics = try await watcher.waitFor(Topics().coordinatorMetrics, timeout: .seconds(15)) {
                ($0["receipts"]?["accepted"]?.int64Value ?? 0) >= 12 && ($0["receipts"]?["duplicate"]?.int64Value ?? 0) >= 1
            }
            #expect(metrics["rooms"]?.int64Value == 8, "\(metrics.text)")
            #expect(metrics["conversations"]?.int64Value == 2, "\(metrics.text)")
            let parts = try #require(metrics["partitions"]?.arrayValue, "\(metrics.text)")
            #expect(parts.compactMap { $0["partition"]?.int64Value } == [0, 1, 2])
            #expect(parts.compactMap { $0["rooms"]?.int64Value }.reduce(0, +) == 8)
            #expect(parts.compactMap { $0["messagesIn"]?.int64Value }.reduce(0, +) == metrics["messagesIn"]?.int64Value)
            // Every partition's session took every message, and left the others' alone.
            #expect(parts.allSatisfy { ($0["messagesElsewhere"]?.int64Value ?? 0) > 0 }, "\(metrics.text)")

            // Each id answered exactly once (the resend's duplicate aside), by one partition.
            for i in Self.rooms.indices.dropFirst() { #expect(alice.receipts(id: "c\(i)").count == 1) }
            #expect(alice.receipts(id: "c0").count == 2)
            #expect(bob.receipts(id: "acc-alice").count == 1)
            #expect(alice.receipts(id: "acc-carol").count == 1)

            // Stopped: what is sent meanwhile waits in the partitions' persistent sessions.
            #expect(await coordinator.stop() == 0)
            try await watcher.waitFor(Topics().coordinatorStatus) { $0 == .obj(["online": false]) }
            try await alice.edit(room: Self.rooms[1], .edit("while-down", "update", sticker: "s", at: nowMillis(), frame: (5, 5, 10, 10)))

            // Another number of partitions is refused before anything is touched: exit 1,
            // saying what the database was created with.
            let refused = try await ChildProcess.run(
                CoordinatorProcess.binary("tandem-coordinator"), coordinator.connectionArguments + ["--partitions", "2"], timeout: .seconds(20))
            #expect(refused.exitCode == 1)
            #expect(refused.standardError.contains("created with 3 partitions"), "\(refused.standardError)")
            #expect(refused.standardError.contains("--partitions 2"), "\(refused.standardError)")
            #expect(watcher.latest(on: Topics().coordinatorStatus) == .obj(["online": false]))
            let check = try await ChildProcess.run(
                CoordinatorProcess.binary("tandem-coordinator"), ["--check", "--json", "--database", coordinator.databasePath], timeout: .seconds(20))
            #expect(try JSON.parse(Array(check.standardOutput.utf8))["partitions"]?.int64Value == 3, "\(check.standardOutput)")

            // Back with three: the waiting event is answered, the rooms are where they were.
            try await coordinator.start()
            #expect(try await alice.receipt("while-down", timeout: .seconds(15))["status"] == "accepted")
            let moved = try await alice.roomState(Self.rooms[1], version: 2)
            #expect(moved["stickers"]?.arrayValue?.first?["frame"]?["x"]?.doubleValue == 5, "\(moved.text)")
            #expect(alice.receipts(id: "while-down").count == 1)
            #expect(await coordinator.stop() == 0)
            for peer in [alice, bob, carol, watcher] { await peer.close() }
        }
    }

    /// One partition's session taken over by another connection with its client id: the
    /// partition reconnects, takes its session back (the broker kept it, and sends no
    /// will for a takeover) and answers again; the status is online throughout.
    @Test(.timeLimit(.minutes(2)))
    func aPartitionWhoseSessionIsTakenOverTakesItBackAndAnswers() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--partitions", "3"])
            let status = Topics().coordinatorStatus
            let watcher = try await TestPeer.connect(broker: broker, user: "watcher", asCoordinatorWatcher: true)
            try await watcher.waitFor(status) { $0["online"]?.boolValue == true }

            let intruder = try MQTTClient(configuration: MQTTConfiguration(
                host: broker.host, port: broker.port, clientId: "tandem-coordinator-p1",
                username: "coordinator", password: "coordinator-demo",
                session: .persistent(expirySeconds: 7 * 24 * 3600), reconnectDelay: 5, reconnectDelayMax: 5))
            try await intruder.connect()
            await intruder.disconnect()

            // part-0 is one of partition 1's rooms
            #expect(try #require(Partitioning(count: 3)).partition(ofRoom: "part-0") == 1)
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            try await alice.edit(room: "part-0", .edit("after-takeover", "create", sticker: "s", image: "a.png", frame: (0, 0, 1, 1)))
            #expect(try await alice.receipt("after-takeover", timeout: .seconds(15))["status"] == "accepted")
            #expect(alice.receipts(id: "after-takeover").count == 1)
            #expect(watcher.latest(on: status)?["online"]?.boolValue == true, "\(watcher.all(on: status).map(\.text))")
            #expect(await coordinator.stop() == 0)
            await alice.close()
            await watcher.close()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aNumberOfPartitionsOutOfRangeIsAUsageError() async throws {
        for value in ["0", "257", "two"] {
            let result = try await ChildProcess.run(CoordinatorProcess.binary("tandem-coordinator"), ["--partitions", value], timeout: .seconds(20))
            #expect(result.exitCode == 64)
            #expect(result.standardError.contains("partitions"), "\(result.standardError)")
        }
    }
}
