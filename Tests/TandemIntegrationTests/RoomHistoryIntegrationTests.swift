import Foundation
import Testing
import TandemCore
import TandemMQTT
import TestSupport

/// CONTRACT "Room history, restore and cursors", over the wire against the built
/// `tandem-coordinator`, the shipped broker configuration and real MQTT peers, on both
/// stores: the `roomHistory` query, a `restore` and its one change, and both surviving a
/// restart of the coordinator.
@Suite(.serialized, .postgres) struct RoomHistoryIntegrationTests {
    enum Store: String, CaseIterable, Sendable { case sqlite, postgres }

    func history(_ peer: TestPeer, _ room: String, id: String, before: Int64? = nil, limit: Int? = nil) async throws -> JSON {
        let topics = Topics(root: "tandem/v1")
        var members: [JSON.Member] = [.init("requestId", .string(id)), .init("type", "roomHistory"), .init("roomId", .string(room))]
        if let before { members.append(.init("before", .int(before))) }
        if let limit { members.append(.init("limit", .int(Int64(limit)))) }
        try await peer.publish(topics.requests(user: peer.user), .object(members))
        return try await peer.waitFor(topics.responses(user: peer.user), timeout: .seconds(15)) { $0["requestId"] == .string(id) }
    }

    func restore(_ id: String, to version: Int64) -> JSON {
        .obj(["eventId": .string(id), "type": "restore", "timestamp": .int(nowMillis()), "version": .int(version)])
    }

    func entries(_ answer: JSON) -> [JSON] {
        if case .array(let items)? = answer["entries"] { return items }
        return []
    }

    @Test(arguments: Store.allCases)
    func historyRestoreAndARestartOnEitherStore(_ store: Store) async throws {
        let database: String? = store == .postgres ? try await PostgresServer.suiteServer().freshDatabase() : nil
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, databasePath: database)
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            let carol = try await TestPeer.connect(broker: broker, user: "carol")
            func close() async {
                for peer in [alice, bob, carol] { await peer.close() }
                await coordinator.stop()
            }
            do {
                let room = "hist-\(store.rawValue)"
                try await alice.invite(room: room, ["bob"])  // version 1: the room, bob in it
                try await alice.roomState(room, version: 1)
                let edits: [JSON] = [
                    .edit("a1", "create", sticker: "s1", image: "star.png", frame: (10, 20, 100, 50)),  // 2
                    .edit("a2", "create", sticker: "s2", image: "moon.png", frame: (200, 20, 80, 80)),  // 3
                    .edit("a3", "update", sticker: "s1", frame: (15, 25, 100, 50)),  // 4
                    .edit("a4", "delete", sticker: "s2"),  // 5
                    .edit("a5", "create", sticker: "s3", image: "sun.png", frame: (300, 300, 60, 60)),  // 6
                ]
                for edit in edits {
                    try await alice.edit(room: room, edit)
                    let id = try #require(edit["eventId"]?.stringValue)
                    #expect(try await alice.receipt(id)["status"] == "accepted")
                }
                _ = try await bob.roomState(room, version: 6)

                // Newest first, every change; a page below a version; a non-member is told so.
                let answer = try await history(bob, room, id: "h1")
                #expect(answer["type"] == "roomHistory")
                #expect(answer["version"] == .int(6))
                #expect(answer["oldest"] == .int(1))
                #expect(answer["epoch"]?.stringValue?.isEmpty == false)
                #expect(entries(answer).map { $0["version"]?.int64Value } == [6, 5, 4, 3, 2, 1])
                #expect(entries(answer).map { $0["type"]?.stringValue } == ["create", "delete", "update", "create", "create", "invite"])
                #expect(entries(answer)[0]["stickerId"] == "s3")
                #expect(entries(answer)[0]["eventId"] == "a5")
                #expect(entries(answer)[0]["userId"] == "alice")
                #expect(entries(answer)[5]["stickerId"] == .null)
                #expect(entries(answer)[0]["timestamp"]?.int64Value != nil)
                #expect(entries(try await history(bob, room, id: "h2", before: 4, limit: 2)).map { $0["version"]?.int64Value } == [3, 2])
                let refused = try await history(carol, room, id: "h3")
                #expect(refused["error"]?["code"] == "not_member")
                let bad = try await history(bob, room, id: "h4", limit: 500)
                #expect(bad["error"]?["code"] == "invalid_payload")

                // Back to version 4: s1 moved, s2 back under its id, s3 gone for good.
                try await bob.edit(room: room, restore("b-restore", to: 4))
                let restored = try await bob.receipt("b-restore")
                #expect(restored["status"] == "accepted")
                #expect(restored["version"] == .int(7))
                let state = try await alice.roomState(room, version: 7)
                #expect(stickerIds(state) == ["s1", "s2"])
                #expect(frame(state, "s1") == [15, 25, 100, 50])
                #expect(sticker(state, "s2")?["image"] == "moon.png")
                #expect(sticker(state, "s1")?["owner"] == .null)
                let change = try #require(alice.all(on: Topics(root: "tandem/v1").roomChanges(room: room)).last)
                #expect(change["fromVersion"] == .int(6))
                let list = try #require(change["changes"]?.arrayValue)
                #expect(list.count == 1)
                #expect(list.first?["type"] == "restore")
                #expect(list.first?["restoredFrom"] == .int(4))
                #expect(list.first?["stickerId"] == .null)
                #expect(list.first?["sticker"] == .null)
                #expect(list.first?["stickers"]?.arrayValue?.count == 2)
                try await alice.edit(room: room, .edit("a6", "create", sticker: "s3", image: "sun.png", frame: (1, 1, 1, 1)))
                #expect(try await alice.receipt("a6")["code"] == "deleted")
                // Refusals: not below the current version.
                try await bob.edit(room: room, restore("b-too-new", to: 7))
                #expect(try await bob.receipt("b-too-new")["code"] == "invalid_payload")

                // After a restart the history and every version in it are still there.
                await coordinator.stop()
                try await coordinator.start()
                let again = try await history(alice, room, id: "h5", limit: 1)
                #expect(again["version"] == .int(7))
                #expect(entries(again).first?["type"] == "restore")
                try await alice.edit(room: room, restore("a-restore", to: 6))
                #expect(try await alice.receipt("a-restore", timeout: .seconds(20))["version"] == .int(8))
                #expect(stickerIds(try await bob.roomState(room, version: 8)) == ["s1", "s3"])
            } catch {
                Issue.record("coordinator log:\n\(coordinator.standardError.suffix(4000))")
                await close()
                throw error
            }
            await close()
        }
    }

    /// PostgreSQL, two coordinators: the leader is killed with its history written; the
    /// standby that takes over answers the same history and restores a version the dead
    /// leader made (the new leader's first change of the room writes a checkpoint of it
    /// as it was, so its versions go on being restorable).
    @Test(.timeLimit(.minutes(2)))
    func historyAndRestoreSurviveAFailover() async throws {
        let url = try await PostgresServer.suiteServer().freshDatabase()
        try await withBroker(.shipped) { broker in
            let cluster = try await CoordinatorCluster.start(
                broker: broker, databaseURL: url, instances: ["c1", "c2"], arguments: ["--leader-lease-seconds", "2"])
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            func close() async {
                for peer in [alice, bob] { await peer.close() }
                _ = await cluster.stopAll()
            }
            do {
                let room = "hist-failover"
                try await alice.invite(room: room, ["bob"])  // 1
                for edit: JSON in [
                    .edit("f1", "create", sticker: "s1", image: "star.png", frame: (10, 20, 100, 50)),  // 2
                    .edit("f2", "create", sticker: "s2", image: "moon.png", frame: (200, 20, 80, 80)),  // 3
                    .edit("f3", "delete", sticker: "s1"),  // 4
                ] {
                    try await alice.edit(room: room, edit)
                    #expect(try await alice.receipt(try #require(edit["eventId"]?.stringValue))["status"] == "accepted")
                }
                let leader = try #require(cluster.leader)
                await cluster.kill(leader.instance)
                let next = try await cluster.waitForLeader(after: leader.term, timeout: .seconds(10))
                #expect(next.instance != leader.instance)

                let answer = try await history(bob, room, id: "hf1")
                #expect(answer["version"] == .int(4))
                #expect(answer["oldest"] == .int(1))
                #expect(entries(answer).map { $0["version"]?.int64Value } == [4, 3, 2, 1])
                try await bob.edit(room: room, restore("bf-restore", to: 3))
                let restored = try await bob.receipt("bf-restore", timeout: .seconds(20))
                #expect(restored["status"] == "accepted")
                #expect(restored["version"] == .int(5))
                #expect(stickerIds(try await alice.roomState(room, version: 5)) == ["s1", "s2"])
                // Versions the new leader made are restorable too.
                try await alice.edit(room: room, .edit("f4", "delete", sticker: "s2"))  // 6
                #expect(try await alice.receipt("f4")["version"] == .int(6))
                try await alice.edit(room: room, restore("af-restore", to: 5))
                #expect(try await alice.receipt("af-restore")["version"] == .int(7))
                #expect(stickerIds(try await bob.roomState(room, version: 7)) == ["s1", "s2"])
            } catch {
                for instance in ["c1", "c2"] { Issue.record("\(instance):\n\(cluster.currentLog(instance).suffix(3000))") }
                await close()
                throw error
            }
            await close()
        }
    }
}
