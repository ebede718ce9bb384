import Testing
import TandemCore
@testable import TandemEngine

/// Issue 11 (3): every deadline runs on the monotonic tick, every time of day on the
/// wall clock, so a wall clock stepped an hour either way delays no event past its
/// window and expires no lock early. The engine with an injected clock, no I/O.
@Suite struct ClockStepTests {
    static let t0: Millis = 1_800_000_000_000
    static let hour: Millis = 3_600_000

    func engine() -> Engine {
        var c = EngineConfiguration()
        c.lockLeaseMs = 30_000
        return Engine(configuration: c, epoch: "e0", now: Self.t0)
    }

    func event(_ id: String, _ type: String, sticker: String, at timestamp: Millis) -> [UInt8] {
        var members: [JSON.Member] = [
            .init("eventId", .string(id)), .init("type", .string(type)), .init("stickerId", .string(sticker)),
            .init("timestamp", .int(timestamp)),
        ]
        if type == "create" { members.append(.init("image", "a.png")) }
        if type == "create" || type == "update" {
            members.append(.init("frame", .obj(["x": 1, "y": 2, "width": 3, "height": 4])))
        }
        return JSON.object(members).serialized()
    }

    func firstSticker(_ step: Engine.Step) -> JSON? {
        guard let state = step.publications.first(where: { $0.topic == "tandem/v1/rooms/r1/state" }),
              case .array(let stickers)? = (try? JSON.parse(state.payload))?["stickers"] else { return nil }
        return stickers.first
    }

    func receipts(_ step: Engine.Step) -> [JSON] {
        step.publications.filter { $0.topic.hasSuffix("/receipts") }.compactMap { try? JSON.parse($0.payload) }
    }

    @Test(arguments: [hour, -hour])
    func aSteppedWallClockNeitherDelaysAWindowNorExpiresALock(_ step: Millis) {
        var e = engine()
        let topic = "tandem/v1/rooms/r1/events/alice"
        // alice creates s1 (and holds its lock for 30 s) at tick t0.
        _ = e.ingest(topic: topic, payload: event("c1", "create", sticker: "s1", at: Self.t0), at: .init(Self.t0))
        _ = e.ingest(topic: topic, payload: invitePayload("i1", member: "bob", at: Self.t0), at: .init(Self.t0))
        let first = e.step(at: .init(Self.t0 + 30))
        #expect(receipts(first).map { $0["status"]?.stringValue } == ["accepted", "accepted"])

        // An event waits in the buffer when the wall clock is stepped.
        _ = e.ingest(topic: topic, payload: event("u1", "update", sticker: "s1", at: Self.t0 + 100), at: .init(Self.t0 + 100))
        let wall = Self.t0 + 110 + step
        // And another arrives after the step, stamped by a client that agrees with the new wall.
        _ = e.ingest(topic: topic, payload: event("u2", "update", sticker: "s1", at: wall), at: .init(wall: wall, tick: Self.t0 + 110))
        // Both leave their window on the tick, 30 ms after each arrived.
        #expect(e.nextDeadline == Self.t0 + 130)
        let released = e.step(at: .init(wall: wall + 30, tick: Self.t0 + 140))
        // (In timestamp order: after a step back, u2's timestamp sorts first.)
        #expect(Set(receipts(released).compactMap { $0["id"]?.stringValue }) == ["u1", "u2"])
        #expect(receipts(released).allSatisfy { $0["status"] == "accepted" })

        // The lock stays alice's: its lease runs 30 s on the tick from her last event,
        // whatever the wall clock says now.
        let bob = "tandem/v1/rooms/r1/events/bob"
        _ = e.ingest(topic: bob, payload: event("b1", "acquire", sticker: "s1", at: wall + 50), at: .init(wall: wall + 50, tick: Self.t0 + 150))
        let refused = e.step(at: .init(wall: wall + 80, tick: Self.t0 + 180))
        #expect(receipts(refused).first?["code"] == "owned_by_other")
        // Her last event was applied at tick t0+140: the lease runs to t0+30140.
        let early = e.step(at: .init(wall: wall + 29_000, tick: Self.t0 + 140 + 29_999))
        #expect(firstSticker(early) == nil)
        // It expires on the tick, stamped with the wall clock's time of day.
        let expired = e.step(at: .init(wall: wall + 30_000, tick: Self.t0 + 140 + 30_000))
        let sticker = firstSticker(expired)
        #expect(sticker?["owner"] == JSON.null)
        #expect(sticker?["updatedAt"]?.int64Value == wall + 30_000)
        // The event log and the remembered ids carry the wall clock.
        #expect(released.batch.events.map(\.at) == [wall + 30, wall + 30])
    }

    @Test func timestampsAreClampedAgainstTheWallClock() {
        var e = engine()
        let wall = Self.t0 + Self.hour
        // Ahead of the (stepped) wall clock by more than the skew: clamped to it.
        _ = e.ingest(topic: "tandem/v1/rooms/r1/events/alice",
                     payload: event("c1", "create", sticker: "s1", at: wall + 10_000), at: .init(wall: wall, tick: Self.t0))
        let step = e.step(at: .init(wall: wall + 30, tick: Self.t0 + 30))
        #expect(firstSticker(step)?["updatedAt"]?.int64Value == wall)
    }
}
