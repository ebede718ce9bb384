import Foundation
import Testing
@testable import TandemCore

/// The direct snapshot writer must give exactly what the JSON-tree encoder gives, and
/// the binary body must give back the same room, byte for byte the same body again.
@Suite struct RoomEncodingTests {
    static func randomRoom(seed: Int) -> RoomState {
        var rng = SplitMix64(seed: UInt64(seed) &+ 17)
        var room = RoomState(roomId: "room-\(seed)")
        let users = ["alice", "bob", "carol", "a-user-id-longer-than-fifteen-bytes"]
        let types: [EditEvent.Kind] = [.create, .create, .acquire, .update, .release, .delete]
        for i in 0..<300 {
            let user = users[Int(rng.next() % UInt64(users.count))]
            let type = types[Int(rng.next() % UInt64(types.count))]
            let sticker = "s\(rng.next() % 40)"
            let frame = Frame(x: Double(rng.next() % 1000) / 7, y: -Double(rng.next() % 100), width: 1.5 + Double(rng.next() % 90), height: 10)
            let event = EditEvent(eventId: "e\(i)", type: type, stickerId: sticker, timestamp: 1_000 + Millis(i),
                                  image: type == .create ? (i % 2 == 0 ? "im\\\"age\u{1}é.png" : "plain.png") : nil, frame: frame)
            _ = room.apply(event, from: user, now: 2_000 + Millis(i), lease: rng.next() % 2 == 0 ? 30_000 : 5)
            if i % 50 == 49 { _ = room.expireLeases(now: 2_000 + Millis(i)) }
        }
        return room
    }

    @Test(arguments: 0..<20)
    func encodersAgreeWithTheJSONTreeAndTheBodyRoundTrips(seed: Int) throws {
        var room = Self.randomRoom(seed: seed)
        #expect(room.snapshotBytes(epoch: "ep\"1") == room.snapshot(epoch: "ep\"1").json().serialized())
        let body = room.persistedBytes()
        let restored = try RoomState(persistedBytes: body)
        #expect(restored == room)
        #expect(restored.persistedBytes() == body, "the same state gives the same bytes")
        #expect(body.count * 3 < room.persisted().serialized().count, "binary: \(body.count) B")

        // Packed (once no lock is held): the same snapshot, the same room back.
        #expect(PackedRoom(room) == nil || room.nextLeaseDeadline == nil)
        _ = room.expireLeases(now: .max)
        let packed = try #require(PackedRoom(room))
        #expect(packed.snapshotBytes(epoch: "ep\"1") == room.snapshotBytes(epoch: "ep\"1"))
        #expect(packed.unpacked() == room)
        #expect((packed.version, packed.stickerCount, packed.updatedAt) == (room.version, room.stickerCount, room.updatedAt))
    }

    @Test func anEmptyRoomToo() throws {
        let room = RoomState(roomId: "r")
        #expect(room.snapshotBytes(epoch: "e") == room.snapshot(epoch: "e").json().serialized())
        #expect(try RoomState(persistedBytes: room.persistedBytes()) == room)
        #expect(try #require(PackedRoom(room)).snapshotBytes(epoch: "e") == room.snapshotBytes(epoch: "e"))
    }

    /// Past 16 distinct names the encoder looks them up in a dictionary: the same bytes.
    @Test func manyDistinctNamesRoundTrip() throws {
        var room = RoomState(roomId: "r")
        for i in 0..<60 {
            let event = EditEvent(eventId: "e\(i)", type: .create, stickerId: "s\(i)", timestamp: 5, image: "image-\(i % 23).png",
                                  frame: Frame(x: 1, y: 2, width: 3, height: 4))
            #expect(room.apply(event, from: "user-\(i % 31)", now: 5, lease: 30_000).isAccepted)
        }
        let body = room.persistedBytes()
        let restored = try RoomState(persistedBytes: body)
        #expect(restored == room)
        #expect(restored.persistedBytes() == body)
    }

    /// Frame numbers come back exactly, whichever way they are written.
    @Test func everyFrameNumberComesBackExactly() throws {
        let numbers: [Double] = [0, -0.0, 1, -1, 0.5, 1e300, -1e-300, 9_007_199_254_740_991, 9_007_199_254_740_992,
                                 -9_007_199_254_740_994, 1.0e20, .infinity, -.infinity, .greatestFiniteMagnitude, .leastNonzeroMagnitude, .nan]
        var room = RoomState(roomId: "r")
        for (i, x) in numbers.enumerated() {
            let frame = Frame(x: x, y: -x, width: numbers[(i + 3) % numbers.count], height: 7)
            let event = EditEvent(eventId: "e\(i)", type: .create, stickerId: "s\(i)", timestamp: 5, image: "i", frame: frame)
            #expect(room.apply(event, from: "alice", now: 5, lease: 30_000).isAccepted)
        }
        let restored = try RoomState(persistedBytes: room.persistedBytes())
        #expect(restored.stickerCount == numbers.count)
        for (a, b) in zip(room.stickers, restored.stickers) {
            for (x, y) in [(a.frame.x, b.frame.x), (a.frame.y, b.frame.y), (a.frame.width, b.frame.width), (a.frame.height, b.frame.height)] {
                #expect(x.bitPattern == y.bitPattern)
            }
        }
    }
}

/// Every room snapshot must fit through the shipped broker: a publication larger than
/// its `max_packet_size` is refused by libmosquitto (the server's maximum in CONNACK),
/// and the retained state would stay behind the room for good (seen: a room of some 400
/// stickers under a long failover test stopped at 66,000 bytes).
@Suite struct SnapshotSizeTests {
    /// `max_packet_size` in broker-config/mosquitto.conf.
    static func shippedMaxPacketSize() throws -> Int {
        let config = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("broker-config/mosquitto.conf")
        let text = try String(contentsOf: config, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("max_packet_size ") })
        return try #require(Int(line.split(separator: " ")[1]))
    }

    @Test func theLargestRoomSnapshotFitsTheShippedBrokersPacketLimit() throws {
        // 1,000 stickers (the default --max-stickers-per-room), every field at its longest
        // and an image of characters that JSON escapes six bytes each.
        var room = RoomState(roomId: String(repeating: "r", count: 64))
        let image = String(repeating: "\u{1}", count: WireLimits.maxImageLength)
        let frame = Frame(x: -1.2345678901234567e-300, y: 1.2345678901234567e300, width: .greatestFiniteMagnitude, height: -.leastNonzeroMagnitude)
        for i in 0..<1_000 {
            let id = String(i) + String(repeating: "s", count: 64 - String(i).count)
            let event = EditEvent(eventId: "e\(i)", type: .create, stickerId: id, timestamp: 5, image: image, frame: frame)
            let owner = String(i % 8) + String(repeating: "u", count: 63)
            #expect(room.apply(event, from: owner, now: 5, lease: 30_000).isAccepted)
        }
        let bytes = room.snapshotBytes(epoch: "0123456789abcdef").count
        let limit = try Self.shippedMaxPacketSize()
        // The packet adds the topic (under 200 bytes) and a few header bytes.
        #expect(bytes + 1_000 <= limit, "the largest room snapshot is \(bytes) bytes; the broker's max_packet_size is \(limit)")
        print("SnapshotSizeTests: the largest room snapshot is \(bytes) bytes; max_packet_size \(limit)")
    }
}
