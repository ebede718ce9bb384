import Testing
import TandemCore
@testable import TandemEngine

/// The engine without any I/O: messages in, batches and publications out.
@Suite struct EngineTests {
    static let t0: Millis = 1_800_000_000_000

    func engine(_ configure: (inout EngineConfiguration) -> Void = { _ in }) -> Engine {
        var c = EngineConfiguration()
        configure(&c)
        return Engine(configuration: c, epoch: "e0", now: Self.t0)
    }

    func create(_ id: String, sticker: String, at t: Millis = t0) -> [UInt8] {
        JSON.obj([
            "eventId": .string(id), "type": "create", "stickerId": .string(sticker), "timestamp": .int(t),
            "image": "a.png", "frame": .obj(["x": 1, "y": 2, "width": 3, "height": 4]),
        ]).serialized()
    }

    func receipts(_ publications: [Publication], for user: String) -> [JSON] {
        publications.filter { $0.topic == "tandem/v1/users/\(user)/receipts" }.compactMap { try? JSON.parse($0.payload) }
    }

    @Test func anEventWaitsForItsWindowThenIsCommittedAndPublishedOnce() throws {
        var e = engine()
        let r1 = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e1", sticker: "s1"), now: Self.t0)
        #expect(r1.isEmpty)
        #expect(e.nextDeadline == Self.t0 + 30)
        let r2 = e.step(now: Self.t0 + 29)
        #expect(r2.publications.isEmpty)
        let step = e.step(now: Self.t0 + 30)
        #expect(step.batch.seenIds.map(\.id) == ["e1"])
        #expect(step.batch.events.map(\.status) == [.accepted])
        #expect(step.batch.entities.map(\.key) == ["r1"])
        #expect(step.publications.map(\.topic) == [
            "tandem/v1/rooms/r1/changes", "tandem/v1/rooms/r1/state", "tandem/v1/users/alice/rooms/r1", "tandem/v1/users/alice/receipts",
        ])
        #expect(step.publications[1].retain)
        #expect(receipts(step.publications, for: "alice").first?["version"] == .int(1))
    }

    @Test func aBurstIntoOneRoomIsOneSnapshot() {
        var e = engine { $0.rateLimitPerSecond = 0 }
        for i in 0..<1000 {
            _ = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e\(i)", sticker: "s\(i)"), now: Self.t0)
        }
        let step = e.step(now: Self.t0 + 30)
        #expect(step.publications.filter { $0.topic == "tandem/v1/rooms/r1/state" }.count == 1)
        #expect(step.publications.filter { $0.topic == "tandem/v1/rooms/r1/changes" }.count == 1)
        #expect(receipts(step.publications, for: "alice").count == 1000)
        #expect(step.batch.entities.count == 1)
    }

    @Test func aDuplicateIsAnsweredAtOnceWithTheCurrentVersion() {
        var e = engine()
        _ = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e1", sticker: "s1"), now: Self.t0)
        _ = e.step(now: Self.t0 + 30)
        let again = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e1", sticker: "s1"), now: Self.t0 + 40)
        let receipt = receipts(again, for: "alice")
        #expect(receipt.first?["status"] == "duplicate")
        #expect(receipt.first?["version"] == .int(1))
        #expect(receipt.first?["code"] == .null)
        // The first copy's outcome rides along, for a client whose receipt was lost.
        #expect(receipt.first?["original"] == .obj(["status": "accepted", "code": .null, "version": .int(1)]))
        // A copy arriving while the first still waits is answered when the first is
        // applied, right after it, with its outcome.
        _ = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e2", sticker: "s2"), now: Self.t0 + 50)
        let early = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e2", sticker: "s2"), now: Self.t0 + 51)
        #expect(early.isEmpty)
        let step = e.step(now: Self.t0 + 80)
        let answers = receipts(step.publications, for: "alice")
        #expect(answers.map { $0["status"] ?? .null } == ["accepted", "duplicate"])
        #expect(answers.last?["original"] == .obj(["status": "accepted", "code": .null, "version": .int(2)]))
        // The same id from another user is another event.
        let r3 = e.ingest(topic: "tandem/v1/rooms/r1/events/bob", payload: create("e1", sticker: "s2"), now: Self.t0 + 40)
        #expect(r3.isEmpty)
    }

    @Test func unreadablePayloadsAreAnsweredWithTheirIdWhenReadable() {
        var e = engine()
        let bad = JSON.obj(["eventId": "e9", "type": "create", "stickerId": "s1", "timestamp": "now"]).serialized()
        let receiptRaw = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: bad, now: Self.t0)
        let receipt = receipts(receiptRaw, for: "alice").first
        #expect(receipt?["id"] == "e9")
        #expect(receipt?["code"] == "invalid_payload")
        #expect(receipt?["version"] == .null)
        let garbageRaw = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: [0xFF, 0x00], now: Self.t0)
        let garbage = receipts(garbageRaw, for: "alice").first
        #expect(garbage?["id"] == "")
        let r4 = e.ingest(topic: "tandem/v1/rooms/r1/events/al%ice", payload: bad, now: Self.t0)
        #expect(r4.isEmpty)
        #expect(e.metrics.dropped == 1)
    }

    @Test func theRateLimitRefusesWithoutRememberingTheId() {
        var e = engine { $0.rateLimitPerSecond = 1; $0.rateLimitBurst = 2 }
        let topic = "tandem/v1/rooms/r1/events/alice"
        let r5 = e.ingest(topic: topic, payload: create("a", sticker: "s1"), now: Self.t0)
        #expect(r5.isEmpty)
        let r6 = e.ingest(topic: topic, payload: create("b", sticker: "s2"), now: Self.t0)
        #expect(r6.isEmpty)
        let refusedRaw = e.ingest(topic: topic, payload: create("c", sticker: "s3"), now: Self.t0)
        let refused = receipts(refusedRaw, for: "alice")
        #expect(refused.first?["code"] == "rate_limited")
        // A second later there is a token again, and "c" was not remembered.
        let r7 = e.ingest(topic: topic, payload: create("c", sticker: "s3"), now: Self.t0 + 1000)
        #expect(r7.isEmpty)
    }

    @Test func aFullRoomRefusesNewStickers() {
        var e = engine { $0.maxStickersPerRoom = 2 }
        let topic = "tandem/v1/rooms/r1/events/alice"
        for (i, s) in ["s1", "s2", "s3"].enumerated() {
            _ = e.ingest(topic: topic, payload: create("e\(i)", sticker: s, at: Self.t0 + Millis(i)), now: Self.t0)
        }
        let step = e.step(now: Self.t0 + 30)
        #expect(receipts(step.publications, for: "alice").map { $0["code"] ?? .null } == [.null, .null, "room_full"])
    }

    @Test func aFutureTimestampIsClamped() throws {
        var e = engine()
        _ = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e1", sticker: "s1", at: Self.t0 + 3_600_000), now: Self.t0)
        #expect(e.metrics.clampedTimestamps == 1)
        let step = e.step(now: Self.t0 + 30)
        let state = try JSON.parse(step.publications.first { $0.topic == "tandem/v1/rooms/r1/state" }!.payload)
        #expect(state["updatedAt"] == .int(Self.t0))
    }

    @Test func aLeaseExpiresAndIsPublishedAsAnExpireChange() throws {
        var e = engine { $0.lockLeaseMs = 1000 }
        _ = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e1", sticker: "s1"), now: Self.t0)
        _ = e.step(now: Self.t0 + 30)
        #expect(e.nextDeadline == Self.t0 + 30 + 1000)
        let step = e.step(now: Self.t0 + 1030)
        let changes = try JSON.parse(step.publications.first { $0.topic == "tandem/v1/rooms/r1/changes" }!.payload)
        guard case .array(let list)? = changes["changes"] else { Issue.record("no changes"); return }
        #expect(list.first?["type"] == "expire")
        #expect(list.first?["eventId"] == .null)
        #expect(step.batch.entities.count == 1)
    }

    @Test func anOwnerGoneOfflineLosesTheLockAfterTheGrace() throws {
        var e = engine { $0.presenceGraceMs = 500 }
        _ = e.ingest(topic: "tandem/v1/presence/alice/c1", payload: Array(#"{"online":true}"#.utf8), now: Self.t0)
        _ = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e1", sticker: "s1"), now: Self.t0)
        _ = e.step(now: Self.t0 + 30)
        _ = e.ingest(topic: "tandem/v1/presence/alice/c1", payload: Array(#"{"online":false}"#.utf8), now: Self.t0 + 100)
        #expect(e.nextDeadline == Self.t0 + 600)
        let step = e.step(now: Self.t0 + 600)
        let state = try JSON.parse(step.publications.first { $0.topic == "tandem/v1/rooms/r1/state" }!.payload)
        guard case .array(let stickers)? = state["stickers"] else { Issue.record("no stickers"); return }
        #expect(stickers.first?["owner"] == .null)
        #expect(state["version"] == .int(2))
    }

    @Test func telemetryDoesNotWaitAndItsSnapshotIsThrottled() {
        var e = engine()
        let start = JSON.obj(["commandId": "c1", "type": "start", "timestamp": .int(Self.t0)]).serialized()
        _ = e.ingest(topic: "tandem/v1/users/alice/workouts/w1/control/watch", payload: start, now: Self.t0)
        let started = e.step(now: Self.t0 + 30)
        #expect(started.publications.contains { $0.topic == "tandem/v1/users/alice/workouts/w1/state" })
        func flight(_ t: Millis) -> [UInt8] {
            JSON.obj([
                "timestamp": .int(t), "elapsedTime": 1.0, "distance": 3.0, "pace": 330.0, "altitude": 10.0,
                "heading": 90.0, "gpwsStatus": "normal", "latitude": 47.0, "longitude": 8.0,
            ]).serialized()
        }
        let r8 = e.ingest(topic: "tandem/v1/users/alice/workouts/w1/flight/watch", payload: flight(Self.t0 + 100), now: Self.t0 + 100)
        #expect(r8.isEmpty)
        let r9 = e.ingest(topic: "tandem/v1/users/alice/workouts/w1/flight/watch", payload: flight(Self.t0 + 200), now: Self.t0 + 200)
        #expect(r9.isEmpty)
        // The last snapshot went out at +30: the next is due a second later.
        #expect(e.nextDeadline == Self.t0 + 1030)
        let throttled = e.step(now: Self.t0 + 1030)
        #expect(throttled.publications.filter { $0.topic == "tandem/v1/users/alice/workouts/w1/state" }.count == 1)
        // From the phone (not the origin): rejected at once, with the telemetry id.
        let refusedRaw = e.ingest(topic: "tandem/v1/users/alice/workouts/w1/flight/phone", payload: flight(Self.t0 + 300), now: Self.t0 + 300)
        let refused = receipts(refusedRaw, for: "alice")
        #expect(refused.first?["id"] == .string("flight:\(Self.t0 + 300)"))
        #expect(refused.first?["code"] == "not_origin")
    }

    @Test func flushAppliesWhatWaitsWithoutWaiting() {
        var e = engine()
        _ = e.ingest(topic: "tandem/v1/rooms/r1/events/alice", payload: create("e1", sticker: "s1"), now: Self.t0)
        let step = e.flush(now: Self.t0 + 1)
        #expect(receipts(step.publications, for: "alice").first?["status"] == "accepted")
    }

    @Test func aRememberedIdTakesTwentyFourBytesAndKeepsItsOutcome() {
        #expect(MemoryLayout<Engine.SeenEntry>.stride <= 24)
        for original in [
            Receipt.Original(status: .accepted, code: nil, version: 7),
            Receipt.Original(status: .rejected, code: .ownedByOther, version: nil),
            Receipt.Original(status: .rejected, code: .roomFull, version: 0),
        ] {
            #expect(Engine.SeenEntry(at: 1, original: original).original == original)
        }
        #expect(Engine.SeenEntry(at: 1).original == nil)
    }

    /// A room body of the old format (JSON) is read, and written back in the binary one
    /// with the first step, so that the next start reads it fast.
    @Test func oldRoomBodiesAreReadAndRewrittenWithTheFirstStep() async throws {
        var room = RoomState(roomId: "r1")
        _ = room.apply(EditEvent(eventId: "e1", type: .create, stickerId: "s1", timestamp: Self.t0, image: "a.png",
                                 frame: Frame(x: 1, y: 2, width: 3, height: 4)), from: "alice", now: Self.t0, lease: 30_000)
        let rows = [
            EntityRow(kind: EntityKind.room, key: "r1", version: 1, body: room.persisted().serialized(), updatedAt: Self.t0),
            EntityRow(kind: EntityKind.room, key: "r2", version: 1, body: RoomState(roomId: "r2").persistedBytes(), updatedAt: Self.t0),
        ]
        var recovered = Engine.Recovered()
        recovered.rooms = try await Engine.parseRooms(rows)
        var e = try Engine(configuration: EngineConfiguration(), epoch: "e0", recovered: recovered, now: Self.t0)
        #expect(e.nextDeadline == 0)
        let first = e.step(now: Self.t0 + 1)
        #expect(first.batch.entities == [EntityRow(kind: EntityKind.room, key: "r1", version: 1, body: room.persistedBytes(), updatedAt: Self.t0)])
        #expect(first.publications.isEmpty)
        #expect(e.step(now: Self.t0 + 2).batch.entities.isEmpty)
        // A bad body stops the start, naming what is wrong.
        await #expect(throws: RoomState.PersistenceError.self) {
            _ = try await Engine.parseRooms([EntityRow(kind: EntityKind.room, key: "r3", version: 1, body: [0, 2, 1], updatedAt: 0)])
        }
    }

    @Test func snapshotsAreRepublishedInChunksFromTheCurrentState() {
        var e = engine { $0.rateLimitPerSecond = 0 }
        for i in 0..<450 {
            _ = e.ingest(topic: "tandem/v1/rooms/r\(i)/events/alice", payload: create("e\(i)", sticker: "s1"), now: Self.t0)
        }
        _ = e.step(now: Self.t0 + 30)
        e.startRepublishing(now: Self.t0 + 100)
        #expect(e.nextDeadline == Self.t0 + 100)
        var republished: [String] = []
        var now = Self.t0 + 100
        while e.isRepublishing {
            let step = e.step(now: now)
            let states = step.publications.filter { $0.topic.hasSuffix("/state") }
            #expect(states.count <= Engine.republishChunk)
            let allRetained = states.allSatisfy(\.retain)
            #expect(allRetained)
            republished += states.map(\.topic)
            now = e.nextDeadline ?? now
        }
        #expect(Set(republished).count == 450)
        // What is left to wake for is the locks' lease, nothing of the republishing.
        #expect(e.nextDeadline == Self.t0 + 30 + 30_000)
    }

    @Test func queriesAreDecodedAndRateLimitedByTheEngineAndHandedOver() {
        var e = engine { $0.rateLimitPerSecond = 1; $0.rateLimitBurst = 1 }
        let topic = "tandem/v1/users/alice/requests"
        let query = JSON.obj(["requestId": "q1", "type": "logbook"]).serialized()
        let first = e.ingest(topic: topic, payload: query, now: Self.t0)
        #expect(first.isEmpty)
        #expect(e.takeQueries().map(\.request.requestId) == ["q1"])
        #expect(e.takeQueries().isEmpty)
        // Over the limit: refused on the responses topic, nothing for the store.
        let refused = e.ingest(topic: topic, payload: query, now: Self.t0)
        #expect(refused.map(\.topic) == ["tandem/v1/users/alice/responses"])
        #expect((try? JSON.parse(refused[0].payload))?["error"]?["code"] == "rate_limited")
        #expect(e.takeQueries().isEmpty)
        // Unreadable: an error response with the id when readable.
        let bad = e.ingest(topic: topic, payload: JSON.obj(["requestId": "q2", "type": "gossip"]).serialized(), now: Self.t0 + 5000)
        #expect((try? JSON.parse(bad[0].payload))?["requestId"] == "q2")
        #expect((try? JSON.parse(bad[0].payload))?["error"]?["code"] == "invalid_payload")
        #expect(e.metrics.messagesIn == 3)
    }
}
