import Testing
@testable import TandemCore

/// The direct byte writers must give exactly what the JSON-tree encoders give.
@Suite struct RoomEncodingTests {
    @Test(arguments: 0..<20)
    func directEncodersMatchTheJSONTree(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed) &+ 17)
        var room = RoomState(roomId: "room-\(seed)")
        let users = ["alice", "bob", "carol"]
        let types: [EditEvent.Kind] = [.create, .create, .acquire, .update, .release, .delete]
        for i in 0..<300 {
            let user = users[Int(rng.next() % 3)]
            let type = types[Int(rng.next() % UInt64(types.count))]
            let sticker = "s\(rng.next() % 40)"
            let frame = Frame(x: Double(rng.next() % 1000) / 7, y: -Double(rng.next() % 100), width: 1.5 + Double(rng.next() % 90), height: 10)
            let event = EditEvent(eventId: "e\(i)", type: type, stickerId: sticker, timestamp: 1_000 + Millis(i),
                                  image: type == .create ? "im\\\"age\u{1}é.png" : nil, frame: frame)
            _ = room.apply(event, from: user, now: 2_000 + Millis(i), lease: rng.next() % 2 == 0 ? 30_000 : 5)
            if i % 50 == 49 { _ = room.expireLeases(now: 2_000 + Millis(i)) }
        }
        #expect(room.snapshotBytes(epoch: "ep\"1") == room.snapshot(epoch: "ep\"1").json().serialized())
        #expect(room.persistedBytes() == room.persisted().serialized())
    }

    @Test func anEmptyRoomToo() {
        let room = RoomState(roomId: "r")
        #expect(room.snapshotBytes(epoch: "e") == room.snapshot(epoch: "e").json().serialized())
        #expect(room.persistedBytes() == room.persisted().serialized())
    }
}
