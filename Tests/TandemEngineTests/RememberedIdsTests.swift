import Testing
import TandemCore
@testable import TandemEngine

/// Remembered ids in the engine: recent ones exactly, older ones as digests confirmed by
/// the store (``Engine/IdCheck``), folded only once committed, forgotten on time.
@Suite struct RememberedIdsTests {
    static let t0: Millis = 1_800_000_000_000
    static let topic = "tandem/v1/rooms/r1/events/alice"

    func create(_ id: String, sticker: String, at t: Millis = t0) -> [UInt8] {
        JSON.obj([
            "eventId": .string(id), "type": "create", "stickerId": .string(sticker), "timestamp": .int(t),
            "image": "a.png", "frame": .obj(["x": 1, "y": 2, "width": 3, "height": 4]),
        ]).serialized()
    }

    func receipts(_ publications: [Publication]) -> [JSON] {
        publications.filter { $0.topic == "tandem/v1/users/alice/receipts" }.compactMap { try? JSON.parse($0.payload) }
    }

    func configuration() -> EngineConfiguration {
        var c = EngineConfiguration()
        c.rateLimitPerSecond = 0
        return c
    }

    /// An engine whose memory holds a minute of ids (`--id-memory 1m`), each folded into
    /// a digest at the first step after it is applied.
    func engineHoldingAMinuteOfIds() -> Engine {
        var c = configuration()
        c.seenIdMemoryMs = 60_000
        var e = Engine(configuration: c, epoch: "e0", now: Self.t0)
        e.remembered.foldThreshold = 1
        return e
    }

    /// An engine that recovered room r1 (version 1, sticker s1 from e1) and the id e1 as a digest.
    func recovered() throws -> Engine {
        var room = RoomState(roomId: "r1")
        _ = room.apply(EditEvent(eventId: "e1", type: .create, stickerId: "s1", timestamp: Self.t0 - 5_000, image: "a.png",
                                 frame: Frame(x: 1, y: 2, width: 3, height: 4)), from: "alice", now: Self.t0 - 5_000, lease: 30_000, rules: MembershipRules.Context())
        _ = room.expireLeases(now: Self.t0 + 25_000)
        var recovered = Engine.Recovered()
        recovered.rooms.live = [room]
        var digests = IdDigests(since: Self.t0 - 48 * 3_600_000)
        digests.insert(digest: IdDigests.digest(user: "alice", id: "e1"), seenAt: Self.t0 - 5_000)
        digests.seal()
        recovered.seenDigests = digests
        return try Engine(configuration: configuration(), epoch: "e0", recovered: recovered, now: Self.t0)
    }

    @Test func aResendOfARecoveredIdIsCheckedInTheStoreAndAnsweredWithItsOutcome() throws {
        var e = try recovered()
        let now = Self.t0 + 100
        #expect(e.ingest(topic: Self.topic, payload: create("e1", sticker: "s1"), now: now).isEmpty)
        let checks = e.takeIdChecks()
        #expect(checks.map(\.id) == ["e1"] && checks.map(\.user) == ["alice"])
        #expect(e.takeIdChecks().isEmpty)
        // The store says it was seen, and what the first copy got.
        let first = SeenId(userId: "alice", id: "e1", kind: .room, seenAt: Self.t0 - 5_000,
                           original: Receipt.Original(status: .accepted, code: nil, version: 1))
        let answer = receipts(e.resolve(checks[0], firstCopy: first, at: Engine.Now(now + 3)))
        #expect(answer.count == 1)
        #expect(answer.first?["status"] == "duplicate" && answer.first?["id"] == "e1")
        #expect(answer.first?["version"] == .int(2), "the current version: 1 plus the lock expiry")
        #expect(answer.first?["original"] == .obj(["status": "accepted", "code": .null, "version": .int(1)]))
        // Nothing was buffered for it.
        #expect(e.step(now: now + 100).batch.seenIds.isEmpty)
    }

    @Test func aDigestThatCollidesGoesOnAsANewEvent() throws {
        var e = try recovered()
        _ = e.ingest(topic: Self.topic, payload: create("e1", sticker: "s2"), now: Self.t0)
        let check = try #require(e.takeIdChecks().first)
        // The store has no such id: the digest was another id's.
        #expect(e.resolve(check, firstCopy: nil, at: Engine.Now(Self.t0 + 1)).isEmpty)
        // A copy arriving meanwhile is recognised exactly now: it waits for the first.
        #expect(e.ingest(topic: Self.topic, payload: create("e1", sticker: "s2"), now: Self.t0 + 2).isEmpty)
        #expect(e.takeIdChecks().isEmpty)
        let step = e.step(now: Self.t0 + 31)
        #expect(receipts(step.publications).map { $0["status"] ?? .null } == ["accepted", "duplicate"])
        #expect(step.batch.seenIds.map(\.id) == ["e1"])
    }

    /// Applied ids stay exact until the step that applied them is committed; then only a
    /// digest is left, and a resend goes to the store.
    @Test func idsFoldIntoDigestsOnlyOnceCommitted() throws {
        var e = Engine(configuration: configuration(), epoch: "e0", now: Self.t0)
        e.remembered.foldThreshold = 3
        for i in 0..<4 { _ = e.ingest(topic: Self.topic, payload: create("e\(i)", sticker: "s\(i)"), now: Self.t0) }
        // Still in the buffer when the fold comes: it stays exact, and a copy waits for it.
        _ = e.ingest(topic: Self.topic, payload: create("w", sticker: "sw"), now: Self.t0 + 20)
        let first = e.step(now: Self.t0 + 30)
        #expect(first.number == 1)
        #expect(e.remembered.sealed.count == 4 && e.remembered.recent.keys.map(\.id) == ["w"])
        #expect(e.ingest(topic: Self.topic, payload: create("w", sticker: "sw"), now: Self.t0 + 25).isEmpty)
        // Not committed yet: a resend is answered at once, exactly.
        let early = receipts(e.ingest(topic: Self.topic, payload: create("e2", sticker: "s2"), now: Self.t0 + 40))
        #expect(early.first?["status"] == "duplicate" && early.first?["original"]?["status"] == "accepted")
        let second = e.step(now: Self.t0 + 50)
        #expect(receipts(second.publications).map { $0["status"] ?? .null } == ["accepted", "duplicate"])
        #expect(e.remembered.sealed.count == 4, "step 1 is not committed: still exact")
        e.committed(through: first.number)
        e.committed(through: second.number)
        _ = e.step(now: Self.t0 + 60)
        #expect(e.remembered.sealed.isEmpty && e.remembered.older.count == 4)
        #expect(e.gauges.seenIds == 5)
        #expect(e.ingest(topic: Self.topic, payload: create("e2", sticker: "s2"), now: Self.t0 + 70).isEmpty)
        #expect(e.takeIdChecks().map(\.id) == ["e2"])
        // A new id is still new.
        _ = e.ingest(topic: Self.topic, payload: create("e9", sticker: "s9"), now: Self.t0 + 70)
        #expect(e.takeIdChecks().isEmpty)
    }

    /// Every ten minutes ids past the retention are forgotten in memory; the store
    /// forgets its copies with that step's batch and with every batch that remembers ids.
    @Test func oldIdsAreForgottenHereAndInTheStore() throws {
        var e = try recovered()
        let retention = EngineConfiguration().seenIdRetentionMs
        #expect(e.step(now: Self.t0 + 1).batch.forgetSeenIds == nil, "nothing to remember, no pass due")
        let later = Self.t0 + retention + 2 * IdDigests.slotMs
        #expect(e.step(now: later).batch.forgetSeenIds == ForgetSeenIds(before: later - retention, limit: 200))
        #expect(e.remembered.older.isEmpty)
        #expect(e.step(now: later + 1).batch.forgetSeenIds == nil)
        // The id is no longer remembered, nor in the store: a copy (its timestamp from two
        // days ago) is asked of the store, which has forgotten it too: a new event.
        _ = e.ingest(topic: Self.topic, payload: create("e1", sticker: "s7"), now: later + 2)
        let check = try #require(e.takeIdChecks().first)
        #expect(e.resolve(check, firstCopy: nil, at: Engine.Now(later + 3)).isEmpty)
        let applied = e.step(now: later + 40)
        #expect(receipts(applied.publications).first?["status"] == "accepted")
        #expect(applied.batch.forgetSeenIds == ForgetSeenIds(before: later + 40 - retention, limit: 200))
    }

    /// Memory holds the last minutes of ids (`--id-memory`); a resend of an older one
    /// carries its old timestamp, which is what sends it to the store, and the store's
    /// answer makes it a duplicate. A new id with a current timestamp never waits for the store.
    @Test func aResendOlderThanTheMemoryWindowIsAskedOfTheStore() throws {
        var e = engineHoldingAMinuteOfIds()
        _ = e.ingest(topic: Self.topic, payload: create("e1", sticker: "s1"), now: Self.t0)
        let first = e.step(now: Self.t0 + 30)
        #expect(receipts(first.publications).first?["status"] == "accepted")
        e.committed(through: first.number)
        _ = e.step(now: Self.t0 + 40)
        #expect(e.remembered.older.count == 1, "folded into a digest once committed")
        // Three minutes on, with events of then, the digest is forgotten: memory holds
        // only the last minute.
        let later = Self.t0 + 180_000
        _ = e.ingest(topic: Self.topic, payload: create("now1", sticker: "n1", at: later - 100), now: later - 100)
        _ = e.step(now: later)
        #expect(e.remembered.older.isEmpty)
        #expect(e.ingest(topic: Self.topic, payload: create("e1", sticker: "s1"), now: later + 1).isEmpty)
        let check = try #require(e.takeIdChecks().first)
        #expect(check.id == "e1" && e.metrics.idStoreChecks == 1)
        let stored = SeenId(userId: "alice", id: "e1", kind: .room, seenAt: Self.t0,
                            original: Receipt.Original(status: .accepted, code: nil, version: 1))
        let answer = receipts(e.resolve(check, firstCopy: stored, at: Engine.Now(later + 5)))
        #expect(answer.first?["status"] == "duplicate" && answer.first?["original"]?["status"] == "accepted")
        // A new id, stamped now: memory's answer is certain.
        _ = e.ingest(topic: Self.topic, payload: create("e2", sticker: "s2", at: later), now: later + 2)
        #expect(e.takeIdChecks().isEmpty)
        #expect(receipts(e.step(now: later + 40).publications).map { $0["status"] ?? .null } == ["accepted"])
        #expect(e.metrics.idStoreChecks == 1)
    }

    /// A client whose clock runs an hour ahead: its event is clamped, but its id is held
    /// until its own timestamp has passed by the memory window, so a resend half an hour
    /// later (stamped an hour ahead as the first copy was) is still recognised, and one
    /// after that goes to the store. Going by the arrival alone would let it through.
    @Test func anIdFromAClockAheadIsHeldUntilItsTimestampPasses() throws {
        var e = engineHoldingAMinuteOfIds()
        let ahead = Self.t0 + 3_600_000
        _ = e.ingest(topic: Self.topic, payload: create("e1", sticker: "s1", at: ahead), now: Self.t0)
        let first = e.step(now: Self.t0 + 30)
        #expect(e.metrics.clampedTimestamps == 1)
        #expect(first.batch.seenIds.map(\.seenAt) == [ahead], "stored with its horizon")
        e.committed(through: first.number)
        _ = e.step(now: Self.t0 + 40)
        for (i, later) in [Self.t0 + 1_800_000, ahead + 180_000].enumerated() {
            // Other events of the moment move the window along.
            _ = e.ingest(topic: Self.topic, payload: create("now\(i)", sticker: "n\(i)", at: later - 100), now: later - 100)
            _ = e.step(now: later)
            #expect(e.ingest(topic: Self.topic, payload: create("e1", sticker: "s1", at: ahead), now: later + 1).isEmpty)
            #expect(e.takeIdChecks().map(\.id) == ["e1"], "asked of the store, not applied again")
            #expect(e.step(now: later + 40).batch.seenIds.isEmpty)
        }
        #expect(e.remembered.older.isEmpty, "forgotten once its own timestamp is a window old")
    }

    /// A coordinator that falls behind (a backlog after an outage, an overloaded machine):
    /// the window follows the timestamps it admits, so the events it catches up on, minutes
    /// old, are judged by memory and not sent one by one to the store.
    @Test func aBacklogMinutesOldIsJudgedByMemory() throws {
        var e = engineHoldingAMinuteOfIds()
        _ = e.ingest(topic: Self.topic, payload: create("e1", sticker: "s1"), now: Self.t0)
        e.committed(through: e.step(now: Self.t0 + 30).number)
        // Ten minutes later by the clock, the events arriving are from a second after e1.
        let later = Self.t0 + 600_000
        for i in 0..<5 {
            _ = e.ingest(topic: Self.topic, payload: create("b\(i)", sticker: "b\(i)", at: Self.t0 + 1_000 + Millis(i)), now: later + Millis(i))
            e.committed(through: e.step(now: later + 40 + Millis(i)).number)
        }
        #expect(e.metrics.idStoreChecks == 0 && e.takeIdChecks().isEmpty)
        #expect(e.remembered.older.count >= 1, "e1 is still held: the window ends at the backlog's time")
        // A copy of e1 in the backlog is recognised (its digest: the store confirms it).
        _ = e.ingest(topic: Self.topic, payload: create("e1", sticker: "s1"), now: later + 100)
        #expect(e.takeIdChecks().map(\.id) == ["e1"])
        // The clock is never more than an hour ahead of the window's end.
        #expect(RememberedIds.windowEnd(wall: later, frontier: Self.t0) == Self.t0)
        #expect(RememberedIds.windowEnd(wall: Self.t0 + 7_200_000, frontier: Self.t0) == Self.t0 + 3_600_000)
        #expect(RememberedIds.windowEnd(wall: Self.t0, frontier: Self.t0 + 5_000) == Self.t0)
    }

    /// The event log's retention: every batch that logs events deletes up to twice as
    /// many expired rows (at least 200), so the log is cut in steps as small as the
    /// batches that fill it; none when it is kept for ever.
    @Test func expiredEventLogRowsAreForgottenWithEveryBatchThatLogs() throws {
        var e = try recovered()
        let retention = EngineConfiguration.defaultEventLogRetentionMs
        #expect(e.step(now: Self.t0 + 1).batch.forgetEvents == nil, "nothing logged, no pass due")
        _ = e.ingest(topic: Self.topic, payload: create("e7", sticker: "s7", at: Self.t0 + 2), now: Self.t0 + 2)
        let applied = e.step(now: Self.t0 + 40)
        #expect(applied.batch.events.count == 1)
        #expect(applied.batch.forgetEvents == ForgetEvents(before: Self.t0 + 40 - retention, limit: 200))

        var c = configuration()
        c.eventLogRetentionMs = nil
        var forever = try Engine(configuration: c, epoch: "e0", recovered: Engine.Recovered(), now: Self.t0)
        _ = forever.ingest(topic: Self.topic, payload: create("e8", sticker: "s8", at: Self.t0 + 2), now: Self.t0 + 2)
        let kept = forever.step(now: Self.t0 + 40)
        #expect(kept.batch.events.count == 1)
        #expect(kept.batch.forgetEvents == nil)
    }
}
