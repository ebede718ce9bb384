import Testing
import TandemCore
@testable import TandemEngine

/// Room history and restore in the engine (CONTRACT "Room history, restore and cursors"):
/// the rows and checkpoints each step persists, and a restore held until its room at
/// that version is read, with the events behind it kept in order.
@Suite struct RoomHistoryEngineTests {
    static let t0: Millis = 1_800_000_000_000
    let room = "tandem/v1/rooms/r1/events/"

    func engine() -> Engine {
        var c = EngineConfiguration()
        c.rateLimitPerSecond = 0
        return Engine(configuration: c, epoch: "e0", now: Self.t0)
    }

    func edit(_ id: String, _ type: String, sticker: String, at t: Millis, x: Double = 1) -> [UInt8] {
        var members: [JSON.Member] = [
            .init("eventId", .string(id)), .init("type", .string(type)), .init("stickerId", .string(sticker)), .init("timestamp", .int(t)),
        ]
        if type == "create" { members.append(.init("image", "a.png")) }
        if type == "create" || type == "update" {
            members.append(.init("frame", .obj(["x": .double(x), "y": 2, "width": 3, "height": 4])))
        }
        return JSON.object(members).serialized()
    }

    func restore(_ id: String, to version: Int64, at t: Millis) -> [UInt8] {
        JSON.obj(["eventId": .string(id), "type": "restore", "timestamp": .int(t), "version": .int(version)]).serialized()
    }

    func receipt(_ step: Engine.Step, _ user: String, _ id: String) -> JSON? {
        step.publications.filter { $0.topic == "tandem/v1/users/\(user)/receipts" }
            .compactMap { try? JSON.parse($0.payload) }.first { $0["id"] == .string(id) }
    }

    /// Events from alice, each in a step of its own; returns the last step.
    @discardableResult
    func run(_ e: inout Engine, _ payloads: [[UInt8]], user: String = "alice", from t: inout Millis) -> Engine.Step {
        var last = Engine.Step()
        for payload in payloads {
            _ = e.ingest(topic: room + user, payload: payload, now: t)
            t += 30
            last = e.step(now: t)
            t += 1
        }
        return last
    }

    @Test func everyChangeIsARowAndANewRoomStartsWithAnEmptyCheckpoint() throws {
        var e = engine()
        _ = e.ingest(topic: room + "alice", payload: edit("e1", "create", sticker: "s1", at: Self.t0), now: Self.t0)
        _ = e.ingest(topic: room + "alice", payload: edit("e2", "update", sticker: "s1", at: Self.t0 + 1, x: 9), now: Self.t0 + 1)
        let step = e.step(now: Self.t0 + 40)
        #expect(step.batch.roomHistory.map(\.version) == [1, 2])
        #expect(step.batch.roomHistory.map(\.type) == [.create, .update])
        #expect(step.batch.roomHistory[1].frame?.x == 9)
        #expect(step.batch.roomHistory[1].timestamp == Self.t0 + 1)
        #expect(step.batch.roomCheckpoints.map(\.version) == [0])
        #expect(try RoomHistory.stickers(inCheckpoint: step.batch.roomCheckpoints[0].body).isEmpty)
    }

    @Test func aRestoreWaitsForItsRoomThenAppliesItAndWhatCameAfterInOrder() throws {
        var e = engine()
        var t = Self.t0
        run(&e, [
            edit("e1", "create", sticker: "s1", at: t),
            edit("e2", "create", sticker: "s2", at: t + 40),
            edit("e3", "delete", sticker: "s1", at: t + 80),
            edit("e4", "create", sticker: "s3", at: t + 120),
        ], from: &t)
        // Version 2 had s1 and s2. The restore and an update of s2 right behind it.
        _ = e.ingest(topic: room + "alice", payload: restore("r1", to: 2, at: t), now: t)
        _ = e.ingest(topic: room + "alice", payload: edit("e5", "update", sticker: "s2", at: t + 1, x: 7), now: t + 1)
        let held = e.step(now: t + 40)
        #expect(receipt(held, "alice", "r1") == nil)
        #expect(receipt(held, "alice", "e5") == nil)
        let request = try #require(e.pendingRoomLoad)
        #expect(request == RoomVersionRequest(roomId: "r1", version: 2))
        #expect(e.nextDeadline != t + 40)  // nothing due until the room is read

        let s1 = Sticker(id: "s1", image: "a.png", frame: Frame(x: 1, y: 2, width: 3, height: 4), owner: nil, createdBy: "alice", updatedBy: "alice", updatedAt: 0)
        var s2 = s1
        s2.id = "s2"
        e.roomLoaded(request, .stickers([s1, s2]))
        #expect(e.nextDeadline == 0)
        let step = e.step(now: t + 41)
        #expect(receipt(step, "alice", "r1")?["status"] == "accepted")
        #expect(receipt(step, "alice", "r1")?["version"] == .int(5))
        #expect(receipt(step, "alice", "e5")?["version"] == .int(6))
        let changes = try RoomChanges.decode(try #require(step.publications.first { $0.topic == "tandem/v1/rooms/r1/changes" }).payload)
        #expect(changes.changes.map(\.type) == [.restore, .update])
        #expect(changes.changes[0].restoredFrom == 2)
        #expect(changes.changes[0].stickers?.map(\.id) == ["s1", "s2"])
        #expect(changes.changes[0].stickers?.allSatisfy { $0.owner == nil && $0.updatedBy == "alice" } == true)
        let snapshot = try JSON.parse(try #require(step.publications.first { $0.topic == "tandem/v1/rooms/r1/state" }).payload)
        guard case .array(let stickers)? = snapshot["stickers"] else { Issue.record("no stickers"); return }
        #expect(stickers.map { $0["id"] } == ["s1", "s2"])
        // The restore is a checkpoint of its own; its row names no sticker.
        #expect(step.batch.roomCheckpoints.map(\.version) == [5])
        #expect(step.batch.roomHistory.map(\.type) == [.restore, .update])
        #expect(step.batch.roomHistory[0].stickerId == nil)
        // s3, created after version 2, is tombstoned: it cannot be made again.
        _ = e.ingest(topic: room + "alice", payload: edit("e6", "create", sticker: "s3", at: t + 50), now: t + 50)
        #expect(receipt(e.step(now: t + 90), "alice", "e6")?["code"] == "deleted")
    }

    @Test func theRulesThatNeedNoHistoryAnswerAtOnce() throws {
        var e = engine()
        var t = Self.t0
        run(&e, [edit("e1", "create", sticker: "s1", at: t), edit("e2", "update", sticker: "s1", at: t + 40)], from: &t)
        _ = e.ingest(topic: room + "alice", payload: invitePayload("i1", member: "vic", role: "viewer", at: t), now: t)
        t += 40
        _ = e.step(now: t)
        for (user, id, version, code) in [("vic", "v1", Int64(1), "forbidden"), ("alice", "a1", 3, "invalid_payload"), ("mallory", "m1", 1, "not_member")] {
            _ = e.ingest(topic: room + user, payload: restore(id, to: version, at: t), now: t)
            t += 40
            let step = e.step(now: t)
            #expect(receipt(step, user, id)?["code"] == .string(code), "\(user)")
            #expect(e.pendingRoomLoad == nil)
        }
        _ = e.ingest(topic: "tandem/v1/rooms/nowhere/events/alice", payload: restore("n1", to: 1, at: t), now: t)
        #expect(receipt(e.step(now: t + 40), "alice", "n1")?["code"] == "not_member")
    }

    @Test func historyThatIsGoneIsRefusedAndTheRoomIsUnchanged() throws {
        var e = engine()
        var t = Self.t0
        run(&e, [edit("e1", "create", sticker: "s1", at: t), edit("e2", "update", sticker: "s1", at: t + 40)], from: &t)
        _ = e.ingest(topic: room + "alice", payload: restore("r1", to: 1, at: t), now: t)
        _ = e.step(now: t + 40)
        e.roomLoaded(try #require(e.pendingRoomLoad), .gone)
        let step = e.step(now: t + 41)
        #expect(receipt(step, "alice", "r1")?["code"] == "history_gone")
        #expect(receipt(step, "alice", "r1")?["version"] == .int(2))
        #expect(step.batch.roomHistory.isEmpty)
    }

    @Test func aCheckpointEveryHundredVersions() {
        var e = engine()
        var t = Self.t0
        _ = e.ingest(topic: room + "alice", payload: edit("c", "create", sticker: "s1", at: t), now: t)
        t += 40
        var checkpoints = e.step(now: t).batch.roomCheckpoints.map(\.version)
        for i in 0..<150 {
            _ = e.ingest(topic: room + "alice", payload: edit("u\(i)", "update", sticker: "s1", at: t, x: Double(i)), now: t)
            t += 40
            checkpoints += e.step(now: t).batch.roomCheckpoints.map(\.version)
        }
        #expect(checkpoints == [0, 100])
    }

    @Test func aRoomReadAtAStartGetsACheckpointBeforeItsFirstChange() throws {
        var first = engine()
        var t = Self.t0
        run(&first, [edit("e1", "create", sticker: "s1", at: t), edit("e2", "release", sticker: "s1", at: t + 40)], from: &t)
        let room = try #require(first.rooms["r1"])
        var recovered = Engine.Recovered()
        recovered.rooms.live = [room]
        var second = try Engine(configuration: first.configuration, epoch: "e0", recovered: recovered, now: t)
        _ = second.ingest(topic: self.room + "alice", payload: edit("e3", "acquire", sticker: "s1", at: t), now: t)
        let step = second.step(now: t + 40)
        #expect(step.batch.roomCheckpoints.map(\.version) == [2])
        #expect(step.batch.roomHistory.map(\.version) == [3])
    }

    @Test func theLeaderLoopReadsTheRoomOnceTheStepBeforeIsCommitted() throws {
        var loop = LeaderLoop(engine: engine())
        var t = Self.t0
        for (i, payload) in [edit("e1", "create", sticker: "s1", at: t), edit("e2", "update", sticker: "s1", at: t + 1, x: 5)].enumerated() {
            _ = loop.receive(.message(topic: room + "alice", payload: payload), at: .init(t + Millis(i)))
        }
        t += 40
        _ = loop.receive(.tick, at: .init(t))
        _ = loop.receive(.committed(elapsed: .milliseconds(1)), at: .init(t))
        _ = loop.receive(.message(topic: room + "alice", payload: restore("r1", to: 1, at: t)), at: .init(t))
        t += 40
        let stepped = loop.receive(.tick, at: .init(t))
        // The step before the restore has nothing to commit: the read is asked for at once.
        let loads = stepped.compactMap { action -> RoomVersionRequest? in
            if case .loadRoom(let request) = action { return request }
            return nil
        }
        #expect(loads == [RoomVersionRequest(roomId: "r1", version: 1)])
        // No step and no second read while it is out.
        #expect(loop.receive(.tick, at: .init(t + 100)).isEmpty)
        let s1 = Sticker(id: "s1", image: "a.png", frame: Frame(x: 1, y: 2, width: 3, height: 4), owner: nil, createdBy: "alice", updatedBy: "alice", updatedAt: t)
        let after = loop.receive(.roomLoaded(RoomVersionRequest(roomId: "r1", version: 1), .stickers([s1])), at: .init(t + 101))
        let commits = after.compactMap { action -> StoreBatch? in
            if case .commit(let commit) = action { return commit.batch }
            return nil
        }
        #expect(commits.first?.roomHistory.map(\.type) == [.restore])
    }

    @Test func aDrainWaitsForTheRoomItNeeds() throws {
        var loop = LeaderLoop(engine: engine())
        var t = Self.t0
        _ = loop.receive(.message(topic: room + "alice", payload: edit("e1", "create", sticker: "s1", at: t)), at: .init(t))
        _ = loop.receive(.message(topic: room + "alice", payload: edit("e2", "update", sticker: "s1", at: t + 1)), at: .init(t + 1))
        t += 40
        _ = loop.receive(.tick, at: .init(t))
        _ = loop.receive(.committed(elapsed: .milliseconds(1)), at: .init(t))
        _ = loop.receive(.message(topic: room + "alice", payload: restore("r1", to: 1, at: t)), at: .init(t))
        let draining = loop.receive(.shutdown, at: .init(t + 1))
        #expect(draining.contains { if case .loadRoom = $0 { true } else { false } })
        #expect(loop.stopped == nil)
        let s1 = Sticker(id: "s1", image: "a.png", frame: Frame(x: 1, y: 2, width: 3, height: 4), owner: nil, createdBy: "alice", updatedBy: "alice", updatedAt: t)
        let flushed = loop.receive(.roomLoaded(RoomVersionRequest(roomId: "r1", version: 1), .stickers([s1])), at: .init(t + 2))
        #expect(flushed.contains { if case .commit = $0 { true } else { false } })
        let done = loop.receive(.committed(elapsed: .milliseconds(1)), at: .init(t + 3))
        #expect(loop.stopped == .shutdown)
        #expect(done.contains { if case .publish = $0 { true } else { false } })
    }
}
