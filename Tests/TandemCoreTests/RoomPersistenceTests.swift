import Testing
@testable import TandemCore

@Suite struct RoomPersistenceTests {
    static func busyRoom() -> RoomState {
        var room = RoomState(roomId: "r1")
        room.must(.create, "a", by: "alice", now: 1_000)
        room.must(.create, "b", by: "bob", now: 2_000)
        room.must(.create, "c", by: "carol", now: 3_000)
        room.must(.release, "b", by: "bob", now: 4_000)
        room.must(.delete, "c", by: "carol", now: 5_000)
        room.must(.create, "d", by: "bob", now: 6_000)
        room.must(.update, "a", by: "alice", now: 7_000)
        return room
    }

    @Test func roundTripsTombstonesAndLeaseDeadlines() throws {
        let room = Self.busyRoom()
        let text = room.persisted().text
        var restored = try RoomState(persisted: JSON.parse(text))
        var original = room
        #expect(restored == original)
        #expect(restored.tombstones == ["c"])
        #expect(restored.leaseDeadlines == ["a": 37_000, "d": 36_000])
        #expect(restored.nextLeaseDeadline == 36_000)
        #expect(restored.persisted().text == text, "the same state gives the same bytes")

        // Both go on the same way: a deleted id stays deleted, leases run out alike.
        #expect(restored.apply(Fixture.event(.create, "c", id: "x"), from: "bob", now: 8_000, lease: 30_000).rejection?.code == .deleted)
        #expect(restored.expireLeases(now: 40_000) == original.expireLeases(now: 40_000))
        #expect(restored == original)
    }

    @Test func aLeaseThatRanOutWhileDownExpiresAtStart() throws {
        var restored = try RoomState(persisted: Self.busyRoom().persisted())
        let changes = restored.expireLeases(now: 1_000_000)
        #expect(changes.map(\.stickerId) == ["d", "a"])
        #expect(changes.allSatisfy { $0.sticker?.updatedAt == 1_000_000 })
    }

    @Test func anEmptyRoomRoundTrips() throws {
        let room = RoomState(roomId: "empty")
        #expect(try RoomState(persisted: room.persisted()) == room)
    }

    @Test(arguments: [
        #"{"format":2,"roomId":"r","version":1,"updatedAt":0,"stickers":[],"tombstones":[],"leases":[]}"#,
        #"{"format":1,"roomId":"r","version":1,"updatedAt":0,"stickers":{},"tombstones":[],"leases":[]}"#,
        #"{"format":1,"roomId":"r","version":1,"updatedAt":0,"stickers":[{"id":"a","image":"i","frame":{"x":0,"y":0,"width":1,"height":1},"owner":"alice"}],"tombstones":[],"leases":[]}"#,
        #"{"format":1,"roomId":"r","version":1,"updatedAt":0,"stickers":[],"tombstones":[],"leases":[{"stickerId":"a","deadline":5}]}"#,
        #"{"format":1,"roomId":"r","version":1,"updatedAt":0,"stickers":[{"id":"a","image":"i","frame":{"x":0,"y":0,"width":1,"height":1}}],"tombstones":["a"],"leases":[]}"#,
        #"{"format":1,"roomId":"r","version":0,"updatedAt":0,"stickers":[],"tombstones":["a"],"leases":[]}"#,
    ])
    func refusesInconsistentBlobs(_ text: String) {
        #expect(throws: RoomState.PersistenceError.self) { try RoomState(persisted: JSON.parse(text)) }
    }
}
