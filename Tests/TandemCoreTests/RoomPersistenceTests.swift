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

    @Test func theBinaryBodyRoundTripsTooAndOldJSONRowsAreStillRead() throws {
        let room = Self.busyRoom()
        var restored = try RoomState(persistedBytes: room.persistedBytes())
        #expect(restored == room)
        #expect(restored.tombstones == ["c"])
        #expect(restored.leaseDeadlines == ["a": 37_000, "d": 36_000])
        #expect(restored.nextLeaseDeadline == 36_000)
        #expect(restored.apply(Fixture.event(.create, "c", id: "x"), from: "bob", now: 8_000, lease: 30_000).rejection?.code == .deleted)
        // A row written before the binary format: JSON, read through the same door.
        #expect(try RoomState(persistedBytes: room.persisted().serialized()) == room)
        // A room holding a lock is not packed; once free, it is.
        #expect(PackedRoom(room) == nil)
        var free = room
        _ = free.expireLeases(now: 100_000)
        #expect(try #require(PackedRoom(free)).unpacked() == free)
    }

    /// Every cut of a good body, and bodies that break one rule each, are refused with
    /// an error (never a crash, never a half-read room).
    @Test func refusesBrokenBinaryBodies() {
        let good = Self.busyRoom().persistedBytes()
        for length in 0..<good.count {
            #expect(throws: RoomState.PersistenceError.self) { try RoomState(persistedBytes: Array(good.prefix(length))) }
        }
        #expect(throws: RoomState.PersistenceError.self) { try RoomState(persistedBytes: good + [0]) }

        func body(version: UInt64 = 3, names: [String] = ["i", "alice"], stickers: [(id: String, flags: UInt8, refs: [UInt64])],
                  tombstones: [String] = [], format: UInt8 = 2) -> [UInt8] {
            var out: [UInt8] = [0, format]
            out.appendString("r")
            out.appendVarint(version)
            out.appendZigzag(1_000)
            out.appendVarint(UInt64(names.count))
            for n in names { out.appendString(n) }
            out.appendVarint(UInt64(stickers.count))
            for s in stickers {
                out.appendString(s.id)
                out.append(s.flags)
                for r in s.refs { out.appendVarint(r) }
                for _ in 0..<4 { out.appendZigzag(1) }
                out.appendZigzag(0)
                if s.flags & 0x20 != 0 { out.appendZigzag(40_000) }
            }
            out.appendVarint(UInt64(tombstones.count))
            for t in tombstones { out.appendString(t) }
            return out
        }
        let fine = body(stickers: [("a", 0, [0, 1, 1])])
        #expect(throws: Never.self) { try RoomState(persistedBytes: fine) }
        #expect(throws: Never.self) { try RoomState(persistedBytes: body(stickers: [("a", 0x30, [0, 1, 1, 1])])) }
        for broken in [
            body(stickers: [("a", 0, [0, 1, 1])], format: 3),                     // a format from the future
            body(stickers: [("a", 0, [0, 1, 2])]),                                 // a name not in the table
            body(stickers: [("a", 0x40, [0, 1, 1])]),                              // an unknown flag
            body(stickers: [("a", 0x10, [0, 1, 1, 1])]),                           // a lock without a lease
            body(stickers: [("a", 0x20, [0, 1, 1])]),                              // a lease without a lock
            body(stickers: [("a", 0, [0, 1, 1]), ("a", 0, [0, 1, 1])]),            // a sticker twice
            body(stickers: [("a", 0, [0, 1, 1])], tombstones: ["a"]),              // live and deleted
            body(version: 0, stickers: [("a", 0, [0, 1, 1])]),                     // stickers at version 0
            body(version: 0, stickers: [], tombstones: ["a"]),                     // tombstones at version 0
            body(version: UInt64(bitPattern: -1), stickers: []),                   // a negative version
            [0, 2, 1, 0x72, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],  // a number over 64 bits
            [0, 2, 1, 0x72, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F],                   // a count the body cannot hold
        ] {
            #expect(throws: RoomState.PersistenceError.self) { try RoomState(persistedBytes: broken) }
        }
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
