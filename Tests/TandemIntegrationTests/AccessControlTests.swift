import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 7 (4), the parts BrokerACLTests (rule by rule, with the command-line clients)
/// does not already prove: the same rules with the coordinator running, what the
/// coordinator does with identity, and secrets in its logs and metrics.
@Suite(.serialized) struct AccessControlTests {
    @Test func aSpoofedSenderTopicNeverReachesTheCoordinator() async throws {
        try await withRoomFixture { f in
            let room = "spoof"
            // alice publishes as bob; the broker acknowledges and drops it.
            try? await f.alice.publish(f.topics.roomEvents(room: room, user: "bob"),
                                      .edit("spoofed", "create", sticker: "s-spoof", image: "x.png", frame: (0, 0, 1, 1)))
            try? await f.alice.publish(f.topics.dmCommands(user: "bob"),
                                      .obj(["commandId": "spoofed-dm", "type": "request", "peer": "carol", "timestamp": .int(nowMillis())]))
            // A marker behind it on alice's own topic: once it is answered, the spoofed
            // messages would have been too.
            try await f.alice.edit(room: room, .edit("marker", "create", sticker: "s-marker", image: "m.png", frame: (0, 0, 1, 1)))
            expectAccepted(try await f.alice.receipt("marker"), version: 1)
            try await Task.sleep(for: .milliseconds(300))
            #expect(f.bob.receipts.isEmpty, "\(f.bob.receipts.map(\.text))")
            #expect(f.alice.receipts.map { $0["id"]?.stringValue } == ["marker"])
            let state = try await f.alice.roomState(room, version: 1)
            #expect(stickerIds(state) == ["s-marker"])
            #expect(f.carol.latest(on: f.topics.conversation(user: "carol", peer: "bob")) == nil)

            await f.coordinator.stop()
            let log = try await readEventLog(f.coordinator.databasePath)
            #expect(log.map(\.id) == ["marker"])
        }
    }

    @Test func aUserReadsNothingOfAnotherUsersDMsOrReceipts() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            // alice asks for everything; bob and carol talk.
            let alice = try await TestPeer.connect(broker: broker, user: "alice", extraFilters: ["tandem/v1/#", "tandem/v1/users/+/receipts", "tandem/v1/users/bob/#"])
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            let carol = try await TestPeer.connect(broker: broker, user: "carol")
            let t = nowMillis()
            try await bob.dm(.obj(["commandId": "b1", "type": "request", "peer": "carol", "timestamp": .int(t), "text": "secret plans"]))
            try await bob.receipt("b1")
            try await carol.dm(.obj(["commandId": "c1", "type": "accept", "peer": "bob", "timestamp": .int(t + 1)]))
            try await carol.receipt("c1")
            try await bob.waitFor(Topics().conversation(user: "bob", peer: "carol")) { $0["status"] == "active" }
            try await Task.sleep(for: .milliseconds(300))

            let heard = alice.heard(from: 0)
            let foreign = heard.filter { $0.topic.hasPrefix("tandem/v1/users/") && !$0.topic.hasPrefix("tandem/v1/users/alice/") }
            #expect(foreign.isEmpty, "\(foreign.map(\.topic))")
            #expect(!heard.contains { $0.payloadString.contains("secret plans") })
            for peer in [alice, bob, carol] { await peer.close() }
            #expect(await coordinator.stop() == 0)
        }
    }

    @Test func retainedSnapshotsAndTheStatusCannotBeOverwrittenByAUser() async throws {
        try await withRoomFixture { f in
            let room = "guarded"
            try await f.alice.edit(room: room, .edit("a1", "create", sticker: "s1", image: "x.png", frame: (0, 0, 1, 1)))
            try await f.alice.invite(room: room, ["bob", "carol"])
            let genuine = try await f.carol.roomState(room, version: 3)
            let status = try #require(f.carol.latest(on: f.topics.coordinatorStatus))

            let forged = JSON.obj(["roomId": .string(room), "epoch": "forged", "version": 999, "stickers": .array([])])
            try? await f.alice.publish(f.topics.roomState(room: room), forged, retain: true)
            try? await f.alice.publish(f.topics.coordinatorStatus, .obj(["online": false]), retain: true)
            try? await f.alice.publish(f.topics.conversation(user: "bob", peer: "alice"), .obj(["status": "active"]), retain: true)
            try? await f.alice.publish(f.topics.receipts(user: "bob"), .obj(["id": "x", "status": "accepted"]))

            // A client connecting now gets the coordinator's values, nothing of alice's.
            let late = try await TestPeer.connect(broker: f.broker, user: "bob")
            try await Task.sleep(for: .milliseconds(500))
            #expect(late.latest(on: f.topics.roomState(room: room)) == genuine)
            #expect(late.latest(on: f.topics.coordinatorStatus) == status)
            #expect(late.latest(on: f.topics.conversation(user: "bob", peer: "alice")) == nil)
            #expect(late.receipts.isEmpty && f.bob.receipts.isEmpty)
            #expect(!f.carol.all(on: f.topics.roomState(room: room)).contains { $0["epoch"] == "forged" })
            await late.close()
        }
    }

    @Test func anonymousClientsCannotConnectToRead() async throws {
        try await withBroker(.shipped) { broker in
            let result = try await ChildProcess.run(
                "mosquitto_sub", ["-h", broker.host, "-p", "\(broker.port)", "-t", "tandem/v1/#", "-C", "1", "-W", "2"])
            #expect(result.exitCode != 0)
            #expect(result.standardError.contains("not authorised"), "\(result.standardError)")
        }
    }

    @Test func theCoordinatorTakesIdentityFromTheTopicNeverThePayload() async throws {
        try await withRoomFixture { f in
            let room = "who"
            // Every field a naive decoder might take the sender from says bob.
            let impostor: [JSON.Member] = ["userId", "user", "sender", "owner", "createdBy", "updatedBy", "from"].map { .init($0, "bob") }
            guard case .object(let members) = JSON.edit("w1", "create", sticker: "s1", image: "x.png", frame: (0, 0, 1, 1)) else { return }
            try await f.alice.edit(room: room, .object(members + impostor))
            expectAccepted(try await f.alice.receipt("w1"), version: 1)
            let state = try await f.alice.roomState(room, version: 1)
            #expect(owner(state, "s1") == "alice")
            #expect(sticker(state, "s1")?["createdBy"] == "alice")
            #expect(sticker(state, "s1")?["updatedBy"] == "alice")

            // A DM "from bob" on alice's topic is alice's request to carol.
            try await f.alice.dm(.obj(["commandId": "d1", "type": "request", "peer": "carol", "timestamp": .int(nowMillis()),
                                       "userId": "bob", "sender": "bob", "user": "bob"]))
            #expect(try await f.alice.receipt("d1")["status"] == "accepted")
            let view = try await f.carol.waitFor(f.topics.conversation(user: "carol", peer: "alice"))
            #expect(view["status"] == "received")
            #expect(f.bob.receipts.isEmpty)
            #expect(f.carol.latest(on: f.topics.conversation(user: "carol", peer: "bob")) == nil)
        }
    }

    @Test func thePasswordAppearsInNeitherLogsNorMetrics() async throws {
        try await withBroker(.shipped) { broker in
            let password = "coordinator-demo"
            let coordinator = try await CoordinatorProcess.start(
                broker: broker, arguments: ["--log-level", "trace"])
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            try await alice.edit(room: "r", .edit("e1", "create", sticker: "s1", image: "x.png", frame: (0, 0, 1, 1)))
            try await alice.receipt("e1")
            let metrics = try await alice.waitFor(Topics().coordinatorMetrics, timeout: .seconds(15))
            await alice.close()
            #expect(await coordinator.stop() == 0)
            let log = coordinator.standardError
            #expect(log.contains("trace") || log.contains("debug"), "the log level took effect")
            #expect(!log.contains(password))
            #expect(!metrics.text.contains(password))
            #expect(!broker.log.contains(password))

            // Nor in a usage error that names another flag.
            let bad = try await ChildProcess.run(
                CoordinatorProcess.binary("tandem-coordinator"), ["--password", password, "--port", "nope"])
            #expect(bad.exitCode == 64)
            #expect(!bad.standardError.contains(password), "\(bad.standardError)")
        }
    }
}
