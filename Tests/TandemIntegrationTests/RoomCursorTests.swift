import Foundation
import TandemCore
import TandemMQTT
import Testing
import TestSupport

/// Cursors end to end (CONTRACT "Room history, restore and cursors"): the shipped broker,
/// the real coordinator administering room access with its own account, and users on
/// live connections. The coordinator never reads a cursor; the room roles it writes let
/// each member publish on its own level of its rooms and read the rooms' cursors, and
/// nothing else, and an invite or a removal changes that on the same connections.
@Suite(.serialized) struct RoomCursorTests {
    static let cursorFilters = ["tandem/v1/rooms/+/cursors/+", "tandem/v1/presence/+/+"]

    @Test func onlyMembersPublishTheirOwnCursorsAndReadTheRooms() async throws {
        try await withRoomFixture { f in
            try await f.alice.invite(room: "board", ["bob"])
            let alice = try await TestPeer.connect(broker: f.broker, user: "alice", extraFilters: Self.cursorFilters)
            let bob = try await TestPeer.connect(broker: f.broker, user: "bob", extraFilters: Self.cursorFilters)
            let carol = try await TestPeer.connect(broker: f.broker, user: "carol", extraFilters: ["#"])
            defer { Task { for peer in [alice, bob, carol] { await peer.close() } } }
            let receiptsBefore = alice.receipts.count

            try alice.cursor("board", x: 120.5, y: 80)
            let seen = try await bob.waitFor(cursorTopic("board", "alice"))
            #expect(seen["x"]?.doubleValue == 120.5 && seen["y"]?.doubleValue == 80, "\(seen.text)")
            try bob.cursorLeft("board")
            #expect(try await alice.waitFor(cursorTopic("board", "bob")) == .obj([:]))

            // bob on alice's level, carol (no member) on her own and on alice's: dropped,
            // and carol, subscribed to everything, receives none of the room's cursors.
            try bob.cursor("board", as: "alice", x: 666, y: 666)
            try carol.cursor("board", x: 1, y: 1)
            try carol.cursor("board", as: "alice", x: 2, y: 2)
            try alice.cursor("board", x: 3, y: 3)
            try await alice.waitUntilHeard(marker: try bob.presenceMarker(), from: bob)
            try await alice.waitUntilHeard(marker: try carol.presenceMarker(), from: carol)
            try await carol.waitUntilHeard(marker: try alice.presenceMarker(), from: alice)
            #expect(alice.all(on: cursorTopic("board", "alice")).allSatisfy { $0["x"]?.doubleValue != 666 && $0["x"]?.doubleValue != 2 })
            #expect(alice.all(on: cursorTopic("board", "carol")).isEmpty)
            #expect(carol.heard(from: 0).filter { $0.topic.hasPrefix("tandem/v1/rooms/board/") }.isEmpty)
            // Cursors are no events: the coordinator answers none of them.
            try await Task.sleep(for: .milliseconds(200))
            #expect(alice.receipts.count == receiptsBefore)
        }
    }

    /// Removed: from the receipt of the removal on (the contract allows a second), the
    /// removed member's cursors reach no one and the room's cursors no longer reach it,
    /// without its client reconnecting; invited: the same the other way round.
    @Test func aRemovedMemberStopsAndAnInvitedOneStartsOnTheSameConnection() async throws {
        try await withRoomFixture { f in
            try await f.alice.invite(room: "board", ["bob"])
            let alice = try await TestPeer.connect(broker: f.broker, user: "alice", extraFilters: Self.cursorFilters)
            let bob = try await TestPeer.connect(broker: f.broker, user: "bob", extraFilters: Self.cursorFilters)
            let carol = try await TestPeer.connect(broker: f.broker, user: "carol", extraFilters: Self.cursorFilters)
            defer { Task { for peer in [alice, bob, carol] { await peer.close() } } }
            try bob.cursor("board", x: 1, y: 1)
            try await alice.waitFor(cursorTopic("board", "bob"))

            try await f.alice.edit(room: "board", .membership("x1", "remove", member: "bob"))
            expectAccepted(try await f.alice.receipt("x1"), version: 2)
            let removed = ContinuousClock.now
            try bob.cursor("board", x: 2, y: 2)
            try alice.cursor("board", x: 3, y: 3)
            try await alice.waitUntilHeard(marker: try bob.presenceMarker(), from: bob)
            try await bob.waitUntilHeard(marker: try alice.presenceMarker(), from: alice)
            // Withheld from the first cursors after the removal's receipt: that is the proof;
            // the time is printed, never asserted (a loaded machine only makes it slower).
            print("cursor removal: both directions proven withheld \(ContinuousClock.now - removed) after the receipt")
            #expect(!alice.all(on: cursorTopic("board", "bob")).contains { $0["x"]?.doubleValue == 2 }, "the removed member's cursor was delivered")
            #expect(bob.all(on: cursorTopic("board", "alice")).isEmpty, "the removed member received a cursor")
            #expect(alice.all(on: cursorTopic("board", "alice")).contains { $0["x"]?.doubleValue == 3 })

            try await f.alice.edit(room: "board", .membership("i2", "invite", member: "carol", role: "viewer"))
            expectAccepted(try await f.alice.receipt("i2"), version: 3)
            try carol.cursor("board", x: 4, y: 4)
            try alice.cursor("board", x: 5, y: 5)
            try await alice.waitFor(cursorTopic("board", "carol")) { $0["x"]?.doubleValue == 4 }
            try await carol.waitFor(cursorTopic("board", "alice")) { $0["x"]?.doubleValue == 5 }
            #expect(alice.client.isConnected && bob.client.isConnected && carol.client.isConnected)
        }
    }
}

private func cursorTopic(_ room: String, _ user: String) -> String { "tandem/v1/rooms/\(room)/cursors/\(user)" }

extension TestPeer {
    /// A cursor as an app sends it: QoS 0, not retained, on this user's level of `room`
    /// (or `level`'s, to prove the broker drops it).
    func cursor(_ room: String, as level: String? = nil, x: Double, y: Double) throws {
        try client.enqueue(cursorTopic(room, level ?? user), payload: JSON.obj(["x": .double(x), "y": .double(y)]).serialized(), qos: .atMostOnce)
    }

    /// The pointer left the photo: `{}`.
    func cursorLeft(_ room: String) throws {
        try client.enqueue(cursorTopic(room, user), payload: Array("{}".utf8), qos: .atMostOnce)
    }

    /// A QoS 0 message on this user's presence topic, which every user reads and the
    /// coordinator ignores (it is not a presence payload). QoS 0 messages from one
    /// connection reach each subscriber in order: once another has it, every cursor this
    /// user sent before it has been delivered to that one or withheld.
    func presenceMarker() throws -> String {
        let marker = "marker-\(UInt64.random(in: 0...UInt64.max))"
        try client.enqueue("tandem/v1/presence/\(user)/cursor-marker", payload: Array(marker.utf8), qos: .atMostOnce)
        return marker
    }

    func waitUntilHeard(marker: String, from sender: TestPeer, timeout: Duration = .seconds(5)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !heard(from: 0).contains(where: { $0.topic == "tandem/v1/presence/\(sender.user)/cursor-marker" && $0.payloadString == marker }) {
            guard ContinuousClock.now < deadline else { throw PeerError.timedOut("\(user) heard no marker from \(sender.user) within \(timeout)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
