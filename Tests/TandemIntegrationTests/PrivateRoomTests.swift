import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 20, end to end: the shipped broker (dynamic security), the real coordinator
/// administering room reads with its own account, and users who subscribe to everything
/// they can. A room belongs to its members: nobody else reads or edits it.
@Suite(.serialized) struct PrivateRoomTests {
    let topics = Topics()

    /// A user listening to all of `tandem/v1/#` (and `#`): what it hears of `room`.
    func heardOf(_ room: String, by peer: TestPeer) -> [MQTTMessageSummary] {
        peer.heard(from: 0).filter { $0.topic.hasPrefix("tandem/v1/rooms/\(room)/") && !$0.topic.contains("/events/") }
            .map { MQTTMessageSummary(topic: $0.topic, payload: $0.payloadString) }
    }

    @Test func aNonMemberReadsNothingAndIsRefusedUntilInvitedThenNothingAfterRemoval() async throws {
        try await withRoomFixture { f in
            let room = "private"
            let snoop = try await TestPeer.connect(broker: f.broker, user: "carol", extraFilters: ["tandem/v1/#", "#"])
            defer { Task { await snoop.close() } }
            try await f.alice.edit(room: room, .edit("a1", "create", sticker: "s1", image: "a.png", frame: (0, 0, 10, 10)))
            expectAccepted(try await f.alice.receipt("a1"), version: 1)
            let owned = try await f.alice.roomState(room, version: 1)
            #expect(owned["owner"] == "alice")
            #expect(memberList(owned) == ["alice/owner"])
            let entry = try await f.alice.waitFor(f.topics.userRoom(user: "alice", room: room))
            #expect(entry["role"] == "owner" && entry["owner"] == "alice" && entry["version"]?.int64Value == 1, "\(entry.text)")

            // carol, not a member: every event is not_member, nothing changes, she reads nothing.
            for (id, event) in [("c1", JSON.edit("c1", "acquire", sticker: "s1")),
                                ("c2", JSON.edit("c2", "create", sticker: "s2", image: "c.png", frame: (1, 1, 1, 1))),
                                ("c3", JSON.membership("c3", "invite", member: "carol")),
                                ("c4", JSON.membership("c4", "leave"))] {
                try await snoop.edit(room: room, event)
                expectRejected(try await snoop.receipt(id), code: "not_member", version: 1)
            }
            // A marker published by the coordinator after all of that: once alice has it,
            // carol would have had the room's messages too.
            try await f.alice.edit(room: room, .edit("a2", "update", sticker: "s1", frame: (5, 5, 10, 10)))
            _ = try await f.alice.roomState(room, version: 2)
            try await Task.sleep(for: .milliseconds(300))
            #expect(heardOf(room, by: snoop).isEmpty, "\(heardOf(room, by: snoop))")

            // Invited as a viewer: she reads the room within a second, without reconnecting.
            try await f.alice.edit(room: room, .membership("i1", "invite", member: "carol", role: "viewer"))
            expectAccepted(try await f.alice.receipt("i1"), version: 3)
            let seen = try await snoop.roomState(room, version: 3, timeout: .seconds(1))
            #expect(memberList(seen) == ["alice/owner", "carol/viewer"])
            let carolsEntry = try await snoop.waitFor(f.topics.userRoom(user: "carol", room: room))
            #expect(carolsEntry["role"] == "viewer" && carolsEntry["invitedBy"] == "alice", "\(carolsEntry.text)")
            // A viewer reads but may not edit.
            try await snoop.edit(room: room, .edit("c5", "update", sticker: "s1", frame: (9, 9, 9, 9)))
            expectRejected(try await snoop.receipt("c5"), code: "forbidden", version: 3)
            // Editors may; owners alone manage members.
            try await snoop.edit(room: room, .membership("c6", "invite", member: "bob"))
            expectRejected(try await snoop.receipt("c6"), code: "forbidden", version: 3)
            try await f.alice.edit(room: room, .membership("r1", "role", member: "carol", role: "editor"))
            expectAccepted(try await f.alice.receipt("r1"), version: 4)
            try await snoop.edit(room: room, .edit("c7", "create", sticker: "s3", image: "c.png", frame: (2, 2, 2, 2)))
            expectAccepted(try await snoop.receipt("c7"), version: 5)

            // Removed while she holds s3: her lock expires in the same step, before her removal.
            try await f.alice.edit(room: room, .membership("x1", "remove", member: "carol"))
            expectAccepted(try await f.alice.receipt("x1"), version: 7)
            let changes = try await f.alice.waitFor(f.topics.roomChanges(room: room)) { $0["toVersion"]?.int64Value == 7 }
            let list = changeList(changes)
            #expect(list.map { $0["type"]?.stringValue } == ["expire", "remove"], "\(changes.text)")
            #expect(list.first?["stickerId"] == "s3" && list.last?["member"] == "carol")
            let cleared = try await snoop.waitFor(f.topics.userRoom(user: "carol", room: room)) { _ in true }
            _ = cleared
            // From a second after the removal's receipt: nothing more, live or retained.
            try await Task.sleep(for: .seconds(1))
            let mark = snoop.heard(from: 0).count
            try await f.alice.edit(room: room, .edit("a3", "update", sticker: "s1", frame: (6, 6, 10, 10)))
            _ = try await f.alice.roomState(room, version: 8)
            let late = try await TestPeer.connect(broker: f.broker, user: "carol", extraFilters: ["tandem/v1/#"])
            try await Task.sleep(for: .milliseconds(500))
            #expect(snoop.heard(from: mark).filter { $0.topic.hasPrefix("tandem/v1/rooms/\(room)/") }.isEmpty)
            #expect(late.heard(from: 0).filter { $0.topic.hasPrefix("tandem/v1/rooms/\(room)/") }.isEmpty, "retained state withheld too")
            try await snoop.edit(room: room, .edit("c8", "acquire", sticker: "s1"))
            expectRejected(try await snoop.receipt("c8"), code: "not_member", version: 8)
            await late.close()
        }
    }

    @Test func twoUsersRacingToCreateOneRoomEndWithOneOwner() async throws {
        try await withRoomFixture(["--reorder-window-ms", "300"]) { f in
            let t = nowMillis()
            try await f.bob.edit(room: "race", .edit("b1", "create", sticker: "b", at: t + 1, image: "b.png", frame: (0, 0, 1, 1)))
            try await f.alice.edit(room: "race", .edit("a1", "create", sticker: "a", at: t, image: "a.png", frame: (0, 0, 1, 1)))
            expectAccepted(try await f.alice.receipt("a1"), version: 1)
            expectRejected(try await f.bob.receipt("b1"), code: "not_member", version: 1)
            let state = try await f.alice.roomState("race", version: 1)
            #expect(state["owner"] == "alice")
        }
    }

    @Test func theMemberLimitAndUnknownUsers() async throws {
        try await withRoomFixture(["--max-room-members", "2"]) { f in
            try await f.alice.edit(room: "small", .membership("i1", "invite", member: "bob"))
            expectAccepted(try await f.alice.receipt("i1"), version: 1)
            try await f.alice.edit(room: "small", .membership("i2", "invite", member: "carol"))
            expectRejected(try await f.alice.receipt("i2"), code: "members_full", version: 1)
            try await f.alice.edit(room: "small", .membership("i3", "invite", member: "bob"))
            expectRejected(try await f.alice.receipt("i3"), code: "already_member", version: 1)
            try await f.alice.edit(room: "other", .membership("i4", "invite", member: "nobody-here"))
            expectRejected(try await f.alice.receipt("i4"), code: "unknown_user", version: nil)
            try await f.alice.edit(room: "small", .membership("i5", "invite", member: "alice"))
            expectRejected(try await f.alice.receipt("i5"), code: "forbidden", version: 1)
        }
    }

    /// The broker alone restarted from an older copy of its dynamic-security file while
    /// the coordinator runs: its admin connection comes back and reconciles.
    @Test func aBrokerRestartedFromAnOldFileIsMadeRightByTheRunningCoordinator() async throws {
        try await withRoomFixture { f in
            let dynsec = try #require(f.broker.dynamicSecurityPath)
            try await f.alice.invite(room: "held", ["bob", "carol"])
            let old = try String(contentsOfFile: dynsec, encoding: .utf8)
            try await f.alice.edit(room: "held", .membership("x1", "remove", member: "carol"))
            expectAccepted(try await f.alice.receipt("x1"), version: 3)
            try await f.alice.invite(room: "fresh", ["bob"])

            try await f.broker.restart { try old.write(toFile: dynsec, atomically: true, encoding: .utf8) }
            // The coordinator reconnects by itself; its reconcile follows its admin reconnect.
            let bob = try await TestPeer.connect(broker: f.broker, user: "bob")
            _ = try await bob.roomState("fresh", version: 1, timeout: .seconds(20))
            let carol = try await TestPeer.connect(broker: f.broker, user: "carol", extraFilters: ["tandem/v1/#"])
            try await Task.sleep(for: .milliseconds(500))
            #expect(carol.heard(from: 0).filter { $0.topic.hasPrefix("tandem/v1/rooms/held/") }.isEmpty, "the old file's grant was taken back")
            await bob.close()
            await carol.close()
        }
    }

    /// The database is the truth: a coordinator restart keeps members, and a broker
    /// restarted from an older copy of its dynamic-security file (a room grant missing, a
    /// removed member's grant still there) is made right by the coordinator's reconcile.
    @Test func aRestartAndABrokerWithAnOldFileKeepMembersAndAccessRight() async throws {
        try await withRoomFixture { f in
            let dynsec = try #require(f.broker.dynamicSecurityPath)
            try await f.alice.invite(room: "kept", ["bob", "carol"])
            let old = try String(contentsOfFile: dynsec, encoding: .utf8)  // bob and carol may read "kept"
            try await f.alice.edit(room: "kept", .membership("x1", "remove", member: "carol"))
            expectAccepted(try await f.alice.receipt("x1"), version: 3)
            try await f.alice.invite(room: "later", ["bob"])

            await f.coordinator.stop()
            try await f.broker.restart { try old.write(toFile: dynsec, atomically: true, encoding: .utf8) }
            try await f.coordinator.start()

            let bob = try await TestPeer.connect(broker: f.broker, user: "bob")
            let carol = try await TestPeer.connect(broker: f.broker, user: "carol", extraFilters: ["tandem/v1/#"])
            let kept = try await bob.roomState("kept", version: 3)
            #expect(memberList(kept) == ["alice/owner", "bob/editor"])
            _ = try await bob.roomState("later", version: 1)
            try await Task.sleep(for: .milliseconds(500))
            #expect(carol.heard(from: 0).filter { $0.topic.hasPrefix("tandem/v1/rooms/kept/") }.isEmpty, "the old file's grant was taken back")
            await bob.close()
            await carol.close()
        }
    }
}

/// The snapshot's members as "user/role", in the order they joined.
func memberList(_ snapshot: JSON) -> [String] {
    guard case .array(let members)? = snapshot["members"] else { return [] }
    return members.map { "\($0["userId"]?.stringValue ?? "?")/\($0["role"]?.stringValue ?? "?")" }
}

struct MQTTMessageSummary: CustomStringConvertible {
    var topic: String
    var payload: String
    var description: String { "\(topic) \(payload)" }
}
