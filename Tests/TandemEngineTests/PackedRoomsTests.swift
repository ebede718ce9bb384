import Testing
import TandemCore
@testable import TandemEngine

/// Rooms a restart read are kept packed (their persisted body) until an event touches
/// them, and packed again once idle; nothing a client sees depends on it.
@Suite struct PackedRoomsTests {
    static let t0: Millis = 1_800_000_000_000

    func room(_ id: String, stickers: Int, lockedBy owner: String? = nil) -> RoomState {
        var room = RoomState(roomId: id)
        room.restore(members: RoomMembers(["u0", "u1", "u2", "bob", "alice"].enumerated().map { n, user in
            RoomMember(userId: user, role: n == 0 ? .owner : .editor, since: Self.t0 - 60_000, invitedBy: n == 0 ? nil : "u0")
        }))
        for s in 0..<stickers {
            _ = room.apply(EditEvent(eventId: "c\(s)", type: .create, stickerId: "s\(s)", timestamp: Self.t0 - 60_000, image: "i.png",
                                     frame: Frame(x: Double(s), y: 2.5, width: 3, height: 4)), from: "u\(s % 3)", now: Self.t0 - 60_000, lease: 30_000)
            _ = room.apply(EditEvent(eventId: "r\(s)", type: .release, stickerId: "s\(s)", timestamp: Self.t0 - 60_000), from: "u\(s % 3)", now: Self.t0 - 60_000, lease: 30_000)
        }
        if let owner {
            _ = room.apply(EditEvent(eventId: "a", type: .acquire, stickerId: "s0", timestamp: Self.t0 - 1_000), from: owner, now: Self.t0 - 1_000, lease: 30_000)
        }
        return room
    }

    func row(_ room: RoomState, json: Bool = false) -> EntityRow {
        EntityRow(kind: EntityKind.room, key: room.roomId, version: room.version,
                  body: json ? room.persisted().serialized() : room.persistedBytes(), updatedAt: room.updatedAt)
    }

    func engine(_ rows: [EntityRow]) async throws -> Engine {
        var recovered = Engine.Recovered()
        let members = rows.flatMap { row in
            ["u0", "u1", "u2", "bob", "alice"].enumerated().map { n, user in
                RoomMemberRow(roomId: row.key, userId: user, role: n == 0 ? "owner" : "editor", since: Self.t0 - 60_000,
                              invitedBy: n == 0 ? nil : "u0", position: n)
            }
        }
        recovered.rooms = try await Engine.parseRooms(rows, members: members)
        var c = EngineConfiguration()
        c.rateLimitPerSecond = 0
        return try Engine(configuration: c, epoch: "e0", recovered: recovered, now: Self.t0)
    }

    @Test func aRestartKeepsFreeRoomsPackedAndRewritesOldBodies() async throws {
        let free = room("free", stickers: 20)
        let old = room("old", stickers: 5)
        let locked = room("locked", stickers: 3, lockedBy: "bob")
        var e = try await engine([row(free), row(old, json: true), row(locked)])
        #expect(Set(e.packedRooms.keys) == ["free", "old"])
        #expect(Set(e.rooms.keys) == ["locked"])
        #expect(e.gauges.rooms == 3)
        // The old-format body goes back in the binary format with the first step.
        #expect(e.nextDeadline == 0)
        let first = e.step(now: Self.t0)
        #expect(first.batch.entities.map(\.key) == ["old"])
        #expect(first.batch.entities.first?.body == old.persistedBytes())
        // The lock's lease is watched as before.
        #expect(e.nextDeadline == Self.t0 - 1_000 + 30_000)
        // Republished snapshots are the rooms' own, packed or not.
        e.startRepublishing(now: Self.t0)
        let published = e.step(now: Self.t0 + 1).publications.filter { $0.topic.hasSuffix("/state") }
        let expected = [free, old, locked].map { Publication(topic: "tandem/v1/rooms/\($0.roomId)/state", payload: $0.snapshotBytes(epoch: "e0"), retain: true) }
        #expect(Set(published.map { "\($0.topic) \($0.payload)" }) == Set(expected.map { "\($0.topic) \($0.payload)" }))
    }

    @Test func anEventUnpacksItsRoomAndAnIdleRoomIsPackedAgain() async throws {
        let free = room("free", stickers: 20)
        var e = try await engine([row(free)])
        let topic = "tandem/v1/rooms/free/events/alice"
        // A rejection of an unreadable event reads the version without unpacking.
        let refused = e.ingest(topic: topic, payload: Array("{".utf8), now: Self.t0)
        #expect((try? JSON.parse(refused[0].payload))?["version"] == .int(free.version))
        #expect(e.packedRooms["free"] != nil)

        let move = JSON.obj(["eventId": "m1", "type": "update", "stickerId": "s3", "timestamp": .int(Self.t0),
                             "frame": .obj(["x": 9, "y": 9, "width": 9, "height": 9])]).serialized()
        _ = e.ingest(topic: topic, payload: move, now: Self.t0)
        let step = e.step(now: Self.t0 + 30)
        let receipt = try JSON.parse(step.publications.last!.payload)
        #expect(receipt["status"] == "accepted" && receipt["version"] == .int(free.version + 1))
        #expect(e.packedRooms["free"] == nil && e.rooms["free"]?.sticker("s3")?.frame.x == 9)
        // The same event on the room whole gives the same snapshot.
        var whole = free
        _ = whole.apply(EditEvent(eventId: "m1", type: .update, stickerId: "s3", timestamp: Self.t0, frame: Frame(x: 9, y: 9, width: 9, height: 9)),
                        from: "alice", now: Self.t0 + 30, lease: EngineConfiguration().lockLeaseMs, rules: MembershipRules.Context())
        #expect(step.publications.first { $0.topic.hasSuffix("/state") }?.payload == whole.snapshotBytes(epoch: "e0"))

        // Held by alice: not packed, however long; released and idle: packed again.
        _ = e.step(now: Self.t0 + 20 * 60_000)
        #expect(e.rooms["free"] != nil, "the lease expired just now: the room changed")
        _ = e.step(now: Self.t0 + 45 * 60_000)
        #expect(e.packedRooms["free"]?.version == whole.version + 1 && e.rooms["free"] == nil)
        #expect(e.gauges.rooms == 1)
    }
}
