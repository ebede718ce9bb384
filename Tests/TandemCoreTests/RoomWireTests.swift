import Testing
@testable import TandemCore

@Suite struct RoomWireTests {
    static let sticker = Sticker(id: "s1", image: "cat.png", frame: Frame(x: 1.5, y: 2, width: 30, height: 40), owner: nil, createdBy: "alice", updatedBy: "bob", updatedAt: 1_700_000_000_000)

    @Test func writesAStickerInTheContractsOrderWithANullOwner() {
        #expect(Self.sticker.json().text == #"{"id":"s1","image":"cat.png","frame":{"x":1.5,"y":2,"width":30,"height":40},"owner":null,"createdBy":"alice","updatedBy":"bob","updatedAt":1700000000000}"#)
    }

    @Test func writesASnapshot() throws {
        var room = RoomState(roomId: "r1")
        room.must(.create, "s1", by: "alice", now: 5)
        let snapshot = room.snapshot(epoch: "ep1")
        #expect(snapshot.json().text == #"{"roomId":"r1","epoch":"ep1","version":1,"updatedAt":5,"owner":null,"members":[],"stickers":[{"id":"s1","image":"star.png","frame":{"x":10,"y":20,"width":100,"height":50},"owner":"alice","createdBy":"alice","updatedBy":"alice","updatedAt":5}]}"#)
        #expect(try RoomSnapshot.decode(snapshot.json().serialized()) == snapshot)
    }

    @Test func writesChangesWithNullsForDeleteAndExpire() throws {
        var room = RoomState(roomId: "r1")
        room.must(.create, "a", by: "alice", now: 5)
        room.must(.create, "b", by: "alice", now: 6)
        let delete = try #require(room.apply(Fixture.event(.delete, "a", id: "e3", at: 7), from: "alice", now: 7, lease: 10).change)
        let expire = room.expireLeases(now: 100_000)
        let changes = try #require(RoomChanges(roomId: "r1", epoch: "ep1", changes: [delete] + expire))
        #expect(changes.fromVersion == 2 && changes.toVersion == 4)
        #expect(changes.json().text == #"{"roomId":"r1","epoch":"ep1","fromVersion":2,"toVersion":4,"changes":[{"version":3,"eventId":"e3","userId":"alice","type":"delete","stickerId":"a","sticker":null},{"version":4,"eventId":null,"userId":null,"type":"expire","stickerId":"b","sticker":{"id":"b","image":"star.png","frame":{"x":10,"y":20,"width":100,"height":50},"owner":null,"createdBy":"alice","updatedBy":"alice","updatedAt":100000}}]}"#)
        #expect(try RoomChanges.decode(changes.json().serialized()) == changes)
        #expect(RoomChanges(roomId: "r1", epoch: "ep1", changes: []) == nil)
    }

    @Test func readsSnapshotsLeniently() throws {
        let text = #"{"roomId":"r","epoch":"e","version":3,"stickers":[{"id":"s","image":"i","frame":{"x":0,"y":0,"width":0,"height":0},"future":1}],"more":true}"#
        let snapshot = try RoomSnapshot.decode(Array(text.utf8))
        #expect(snapshot.updatedAt == 0 && snapshot.stickers.first?.owner == nil && snapshot.stickers.first?.createdBy == "")
    }

    @Test func refusesSnapshotsItCannotRead() {
        #expect(throws: Rejection.invalid("stickers must be an array")) {
            try RoomSnapshot.decode(Array(#"{"roomId":"r","epoch":"e","version":3}"#.utf8))
        }
        #expect(throws: Rejection.self) { try RoomSnapshot.decode(Array("{".utf8)) }
        #expect(throws: Rejection.self) { try RoomChanges.decode(Array(#"{"roomId":"r","epoch":"e","fromVersion":1,"toVersion":2,"changes":[{"type":"x"}]}"#.utf8)) }
    }
}
