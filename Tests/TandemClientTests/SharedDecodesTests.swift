import Testing
@testable import TandemClient
import TandemCore

/// ``SharedDecodes``: the same bytes on a topic are decoded once however many clients
/// read them; other bytes, another topic or a full table decode anew; bad bytes are
/// refused as before and never kept.
@Suite struct SharedDecodesTests {
    static func snapshot(_ version: Int64, room: String = "r1") -> TransportMessage {
        let sticker = Sticker(id: "s1", image: "star", frame: Frame(x: 1, y: 2, width: 3, height: 4), owner: nil,
                              createdBy: "alice", updatedBy: "alice", updatedAt: 10)
        let payload = RoomSnapshot(roomId: room, epoch: "e", version: version, updatedAt: 10, stickers: [sticker]).json().serialized()
        return TransportMessage(topic: Topics().roomState(room: room), payload: payload)
    }

    @Test func theSameBytesAreDecodedOnceForEveryReader() throws {
        let shared = SharedDecodes()
        // Each reader has its own copy of the bytes (its own MQTT connection).
        let copies = (0..<5).map { _ in Self.snapshot(7) }
        let values = try copies.map { try shared.roomSnapshot($0) }
        #expect(shared.decoded == 1)
        #expect(values.allSatisfy { $0 == values[0] && $0.version == 7 && $0.stickers.count == 1 })
        // The next version, and another room: decoded.
        #expect(try shared.roomSnapshot(Self.snapshot(8)).version == 8)
        #expect(try shared.roomSnapshot(Self.snapshot(8, room: "r2")).roomId == "r2")
        #expect(shared.decoded == 3)
    }

    static func changes(_ version: Int64, room: String = "r1") -> TransportMessage {
        let sticker = Sticker(id: "s1", image: "star", frame: Frame(x: Double(version), y: 2, width: 3, height: 4), owner: nil,
                              createdBy: "alice", updatedBy: "alice", updatedAt: 10)
        let change = RoomChange(version: version + 1, eventId: "e\(version)", userId: "alice", type: .update, stickerId: "s1", sticker: sticker)
        let payload = RoomChanges(roomId: room, epoch: "e", fromVersion: version, toVersion: version + 1, changes: [change]).serialized()
        return TransportMessage(topic: Topics().roomChanges(room: room), payload: payload)
    }

    @Test func aReaderBehindFindsTheChangeBeforeTheNewest() throws {
        let shared = SharedDecodes()
        _ = try shared.roomChanges(Self.changes(7))
        _ = try shared.roomChanges(Self.changes(8))
        // A client that is one change behind the others reads 7 after 8 was kept.
        #expect(try shared.roomChanges(Self.changes(7)).fromVersion == 7)
        #expect(shared.decoded == 2)
        // Only the last four are kept: 7 is decoded again once four newer ones came.
        for version in 9...11 { _ = try shared.roomChanges(Self.changes(Int64(version))) }
        _ = try shared.roomChanges(Self.changes(7))
        #expect(shared.decoded == 6)
        // A snapshot is kept alone: the one before the newest is decoded again.
        _ = try shared.roomSnapshot(Self.snapshot(1))
        _ = try shared.roomSnapshot(Self.snapshot(2))
        _ = try shared.roomSnapshot(Self.snapshot(1))
        #expect(shared.decoded == 9)
    }

    @Test func readersAtTheSameMomentDecodeOnce() async throws {
        let shared = SharedDecodes()
        // As a room's members' clients on several threads, each with its own bytes.
        let copies = (0..<64).map { _ in Self.snapshot(3) }
        let versions = await withTaskGroup(of: Int64?.self) { group in
            for copy in copies { group.addTask { try? shared.roomSnapshot(copy).version } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(versions.count == 64 && versions.allSatisfy { $0 == 3 })
        #expect(shared.decoded == 1)
    }

    @Test func badBytesAreRefusedAndNotKept() {
        let shared = SharedDecodes()
        let bad = TransportMessage(topic: Topics().roomState(room: "r1"), payload: Array("{\"roomId\":".utf8))
        #expect(throws: Rejection.self) { try shared.roomSnapshot(bad) }
        #expect(throws: Rejection.self) { try shared.roomSnapshot(bad) }
        #expect(shared.decoded == 0)
    }

    @Test func aFullTableStartsAgain() throws {
        let shared = SharedDecodes(limit: 2)
        for room in ["a", "b", "c", "a"] { _ = try shared.roomSnapshot(Self.snapshot(1, room: room)) }
        // "c" found the table full and emptied it: "a" is decoded again.
        #expect(shared.decoded == 4)
        _ = try shared.roomSnapshot(Self.snapshot(1, room: "c"))
        #expect(shared.decoded == 4)
    }
}
