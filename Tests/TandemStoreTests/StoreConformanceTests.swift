import Foundation
import Logging
import Testing
import TandemCore
import TandemPostgres
import TandemStore
import TestSupport

/// One set of expectations for every `CoordinatorStore`: the SQLite file (the embedded
/// default) and PostgreSQL (a real server this suite starts: ``PostgresSuiteTrait``).
/// What the coordinator relies on must hold on both.
@Suite(.postgres) struct StoreConformanceTests {
    enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case sqlite, postgres
        var testDescription: String { rawValue }
    }

    static let logger = Logger(label: "tandem.test.store")

    /// Where a test's store lives, so that it can be opened again.
    struct Place {
        var backend: Backend
        var location: String

        static func make(_ backend: Backend) async throws -> Place {
            switch backend {
            case .sqlite:
                Place(backend: backend, location: try makeTemporaryDirectory(prefix: "conformance-") + "/tandem.sqlite")
            case .postgres:
                Place(backend: backend, location: try await PostgresServer.suiteServer().freshDatabase())
            }
        }

        func open() async throws -> any CoordinatorStore {
            switch backend {
            case .sqlite: try SQLiteStore.open(path: location)
            case .postgres: try await PostgresStore.open(url: PostgresURL(parsing: location), fence: nil, logger: logger)
            }
        }
    }

    func withStore(_ backend: Backend, _ body: (any CoordinatorStore, Place) async throws -> Void) async throws {
        let place = try await Place.make(backend)
        let store = try await place.open()
        do {
            try await body(store, place)
            await store.close()
        } catch {
            await store.close()
            throw error
        }
    }

    // MARK: Fixtures

    static func seen(_ user: String, _ id: String, at: Millis, original: Receipt.Original? = nil) -> SeenId {
        SeenId(userId: user, id: id, kind: .room, seenAt: at, original: original)
    }

    static func event(_ user: String, _ id: String, at: Millis, status: Receipt.Status = .accepted,
                      code: ReceiptCode? = nil, version: Int64? = 1, payload: [UInt8]? = nil) -> EventLogRow {
        EventLogRow(at: at, kind: .room, userId: user, target: "r1", id: id, status: status, code: code,
                    version: version, payload: payload ?? Array(#"{"eventId":"\#(id)"}"#.utf8))
    }

    static func message(_ seq: Int64, sender: String = "alice", sentAt: Millis, text: String? = nil, read: Bool = false) -> DMMessageRow {
        DMMessageRow(conversation: "alice|bob", seq: seq, id: "m\(seq)", sender: sender, text: text ?? "hello \(seq)",
                     sentAt: sentAt, isRead: read)
    }

    static func run(_ id: String, startedAt: Millis, pace: Double? = 300, heart: Double? = 151.5) -> LogbookRow {
        LogbookRow(userId: "alice", workoutId: id, startedAt: startedAt, endedAt: startedAt + 60_000, origin: "watch",
                   mode: "mirrored", distance: 5_000, elapsedTime: 1_500, averagePace: pace, averageHeartRate: heart,
                   maxHeartRate: heart.map { $0 + 20 })
    }

    static func room(_ key: String, version: Int64, body: String = "{}") -> EntityRow {
        EntityRow(kind: EntityKind.room, key: key, version: version, body: Array(body.utf8), updatedAt: version * 10)
    }

    static func allEvents(_ store: any CoordinatorStore) async throws -> [EventLogRow] {
        var rows: [EventLogRow] = []
        while true {
            let page = try await store.eventLog(after: rows.last?.seq ?? 0, limit: 2)
            if page.isEmpty { return rows }
            rows += page
        }
    }

    // MARK: Tests

    /// Room members are rows of their own, replaced per room in the batch's transaction,
    /// and read back in the order they joined; an empty list (a closed room) leaves none.
    /// Issue 21: the partitions' pipelines commit to one store side by side. Four tasks
    /// commit 25 batches each at once, and every fifth batch of the first one fails (a
    /// message seq written twice). Each batch is all or nothing and its own: the failing
    /// ones leave nothing, every other lands whole and once. On PostgreSQL an actor's
    /// commit gives way at each await: without a turn for each, two batches' statements
    /// interleaved on the one connection, and one's failure or COMMIT took the other's
    /// statements with it.
    @Test(arguments: Backend.allCases)
    func commitsFromSeveralTasksAtOnceEachLandWholeOrNotAtAll(_ backend: Backend) async throws {
        try await withStore(backend) { store, _ in
            let failed = try await withThrowingTaskGroup(of: [String].self) { group in
                for partition in 0..<4 {
                    group.addTask {
                        var failed: [String] = []
                        for n in 0..<25 {
                            let user = "p\(partition)"
                            let bad = partition == 0 && n % 5 == 4
                            do {
                                try await store.commit(StoreBatch(
                                    seenIds: (0..<3).map { Self.seen(user, "b\(n)-\($0)", at: 1_000 + Millis(n)) },
                                    events: (0..<3).map { Self.event(user, "b\(n)-\($0)", at: 1_000 + Millis(n)) },
                                    entities: [Self.room("room-\(partition)", version: Int64(n + 1))],
                                    messages: bad ? [Self.message(Int64(n), sentAt: 1), Self.message(Int64(n), sentAt: 2)] : []))
                                #expect(!bad, "batch \(n) of \(user) should have failed")
                            } catch {
                                #expect(bad, "batch \(n) of \(user) failed: \(error)")
                                failed.append(user + "/b\(n)")
                            }
                        }
                        return failed
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(failed.count == 5)
            let events = try await Self.allEvents(store)
            #expect(events.count == (4 * 25 - 5) * 3)
            #expect(!events.contains { failed.contains($0.userId + "/" + $0.id.prefix { $0 != "-" }) })
            #expect(try await store.loadSeenIds(since: 0).count == (4 * 25 - 5) * 3)
            let rooms = try await store.loadEntities(kind: EntityKind.room).sorted { $0.key < $1.key }
            #expect(rooms.map(\.version) == [24, 25, 25, 25], "\(rooms.map { "\($0.key) v\($0.version)" })")
        }
    }

    @Test(arguments: Backend.allCases)
    func roomMembersAreReplacedPerRoomAndSurviveReopening(_ backend: Backend) async throws {
        try await withStore(backend) { store, place in
            func row(_ room: String, _ user: String, _ role: String, _ position: Int, by: String? = "alice") -> RoomMemberRow {
                RoomMemberRow(roomId: room, userId: user, role: role, since: 100 + Millis(position), invitedBy: position == 0 ? nil : by, position: position)
            }
            try await store.commit(StoreBatch(
                entities: [Self.room("r1", version: 2), Self.room("r2", version: 1)],
                roomMembers: [RoomMembersRow(roomId: "r1", members: [row("r1", "alice", "owner", 0), row("r1", "bob", "editor", 1)]),
                              RoomMembersRow(roomId: "r2", members: [row("r2", "carol", "owner", 0)])]))
            // bob leaves r1 and alice passes it on; the last member leaves r2 (closed).
            try await store.commit(StoreBatch(roomMembers: [
                RoomMembersRow(roomId: "r1", members: [row("r1", "dave", "owner", 0), row("r1", "erin", "viewer", 1, by: "dave")]),
                RoomMembersRow(roomId: "r2", members: []),
            ]))
            let expected = [row("r1", "dave", "owner", 0), row("r1", "erin", "viewer", 1, by: "dave")]
            #expect(try await store.loadRoomMembers() == expected)
            await store.close()
            let reopened = try await place.open()
            #expect(try await reopened.loadRoomMembers() == expected)
            await reopened.close()
        }
    }

    @Test(arguments: Backend.allCases)
    func aBatchRoundTripsAndTheEpochSurvivesReopening(_ backend: Backend) async throws {
        try await withStore(backend) { store, place in
            let epoch = store.epoch
            #expect(epoch.count == 16 && epoch.allSatisfy(\.isHexDigit))
            let batch = StoreBatch(
                seenIds: [Self.seen("alice", "e1", at: 100, original: .init(status: .accepted, code: nil, version: 1)),
                          Self.seen("bob", "e2", at: 101, original: .init(status: .rejected, code: .ownedByOther, version: 1)),
                          Self.seen("bob", "e3", at: 102)],
                events: [Self.event("alice", "e1", at: 100),
                         Self.event("bob", "e2", at: 101, status: .rejected, code: .ownedByOther),
                         Self.event("bob", "e3", at: 102, version: nil, payload: [])],
                entities: [Self.room("r1", version: 1, body: #"{"stickers":[]}"#),
                           EntityRow(kind: EntityKind.workout, key: "alice/w1", version: 3, body: [0, 1, 2, 255], updatedAt: 7)],
                messages: [Self.message(1, sentAt: 100, text: "nul \u{0} and ünïcödé ✓")],
                logbook: [Self.run("w1", startedAt: 1_000, pace: nil, heart: nil)]
            )
            try await store.commit(batch)
            try await store.commit(StoreBatch())  // empty: nothing happens

            #expect(try await store.loadEntities(kind: EntityKind.room) == [batch.entities[0]])
            #expect(try await store.loadEntities(kind: EntityKind.workout) == [batch.entities[1]])
            #expect(try await store.loadEntities(kind: EntityKind.conversation) == [])
            let seen = try await store.loadSeenIds(since: 0).sorted { $0.id < $1.id }
            #expect(seen == batch.seenIds)
            #expect(try await store.loadSeenIds(since: 102).map(\.id) == ["e3"])
            let events = try await Self.allEvents(store)
            #expect(events.map(\.id) == ["e1", "e2", "e3"])
            let seqs = events.compactMap(\.seq)
            #expect(seqs == seqs.sorted() && Set(seqs).count == 3)
            #expect(events.map { var e = $0; e.seq = nil; return e } == batch.events)
            #expect(try await store.latestMessages(conversation: "alice|bob", limit: 10) == batch.messages)
            #expect(try await store.logbook(user: "alice", limit: 10) == batch.logbook)

            let summary = try await store.summary()
            #expect(summary.epoch == epoch)
            #expect((summary.rooms, summary.workouts, summary.messages, summary.events, summary.seenIds, summary.logbookRows) == (1, 1, 1, 3, 3, 1))
            #expect(summary.fileBytes > 0)
            #expect(try await store.integrityCheck() == "ok")
            await store.close()

            let reopened = try await place.open()
            #expect(reopened.epoch == epoch)
            #expect(try await reopened.loadEntities(kind: EntityKind.room) == [batch.entities[0]])
            await reopened.close()
        }
    }

    @Test(arguments: Backend.allCases)
    func seenIdsKeepTheirFirstTimeAndEntitiesAreUpserted(_ backend: Backend) async throws {
        try await withStore(backend) { store, _ in
            try await store.commit(StoreBatch(seenIds: [Self.seen("alice", "e1", at: 100)], entities: [Self.room("r1", version: 1)]))
            // The same id again (a later batch, and twice within one batch), the same room
            // twice in one batch: the first id's time stays, the room's last row wins.
            try await store.commit(StoreBatch(
                seenIds: [Self.seen("alice", "e1", at: 500), Self.seen("alice", "e2", at: 501), Self.seen("alice", "e2", at: 502)],
                entities: [Self.room("r1", version: 2), Self.room("r2", version: 1), Self.room("r1", version: 3)]))
            let seen = try await store.loadSeenIds(since: 0).sorted { $0.id < $1.id }
            #expect(seen.map(\.seenAt) == [100, 501])
            let rooms = try await store.loadEntities(kind: EntityKind.room)
            #expect(rooms.map(\.key) == ["r1", "r2"])
            #expect(rooms.map(\.version) == [3, 1])
            // The logbook too: a workout's row is replaced, the newest start comes first.
            try await store.commit(StoreBatch(logbook: [Self.run("w1", startedAt: 1_000), Self.run("w2", startedAt: 5_000)]))
            try await store.commit(StoreBatch(logbook: [Self.run("w1", startedAt: 9_000, pace: 250)]))
            #expect(try await store.logbook(user: "alice", limit: 10).map(\.workoutId) == ["w1", "w2"])
            #expect(try await store.logbook(user: "alice", limit: 1).map(\.averagePace) == [250])
            #expect(try await store.logbook(user: "bob", limit: 10) == [])
        }
    }

    /// What a restart and a resend of an old id read: every id as a digest, and one id
    /// whole with its first copy's outcome; and the retention, applied with a batch.
    @Test(arguments: Backend.allCases)
    func rememberedIdsAsDigestsOneByOneAndForgotten(_ backend: Backend) async throws {
        try await withStore(backend) { store, _ in
            #expect(try await store.latestSeenAt() == nil, "none remembered yet")
            let first = Self.seen("alice", "e1", at: 100, original: .init(status: .rejected, code: .ownedByOther, version: 4))
            try await store.commit(StoreBatch(seenIds: [
                first, Self.seen("alice", "ünï-ë2", at: 200), Self.seen("bob", "e1", at: 300),
                Self.seen("carol", "e4", at: 7_300_000),
            ]))
            #expect(try await store.latestSeenAt() == 7_300_000, "where a restart's memory window ends")
            let digests = try await store.loadSeenDigests(since: 150)
            #expect(digests.count == 3)
            #expect(digests.contains(user: "alice", id: "ünï-ë2") && digests.contains(user: "bob", id: "e1"))
            #expect(digests.contains(user: "carol", id: "e4"))
            #expect(!digests.contains(user: "alice", id: "e1"), "seen before `since`")
            #expect(!digests.contains(user: "bob", id: "e2"))

            #expect(try await store.seenId(user: "alice", id: "e1") == first)
            #expect(try await store.seenId(user: "alice", id: "e1x") == nil)
            #expect(try await store.seenId(user: "carol", id: "e1") == nil)
            // The query reader answers it too (that is where the coordinator asks).
            let reader = try await store.queryReader()
            #expect(try await reader.seenId(user: "bob", id: "e1")?.seenAt == 300)
            await reader.close()

            // Forgotten before anything else of the batch is written, the oldest first, at
            // most `limit`.
            try await store.commit(StoreBatch(forgetSeenIds: ForgetSeenIds(before: 250, limit: 1), seenIds: [Self.seen("dave", "e5", at: 10)]))
            #expect(try await store.seenId(user: "alice", id: "e1") == nil)
            #expect(try await store.summary().seenIds == 4)
            try await store.commit(StoreBatch(forgetSeenIds: ForgetSeenIds(before: 250, limit: 1)))
            #expect(try await store.seenId(user: "dave", id: "e5") == nil)
            #expect(try await store.summary().seenIds == 3)
            try await store.commit(StoreBatch(forgetSeenIds: ForgetSeenIds(before: 250, limit: 100)))
            #expect(try await store.loadSeenIds(since: 0).map { "\($0.userId)/\($0.id)" }.sorted() == ["bob/e1", "carol/e4"])
        }
    }

    /// The event log's retention: rows processed before the cutoff go, the oldest first,
    /// at most `limit` a batch, and only among the `limit` oldest rows.
    @Test(arguments: Backend.allCases)
    func eventLogRowsAreForgottenInBoundedSteps(_ backend: Backend) async throws {
        try await withStore(backend) { store, _ in
            let ats: [Millis] = [100, 200, 300, 400, 500]
            try await store.commit(StoreBatch(events: ats.enumerated().map { Self.event("alice", "e\($0.offset)", at: $0.element) }))
            func left() async throws -> [Millis] { try await store.eventLog(after: 0, limit: 100).map(\.at) }
            // Deleted before anything else of the batch is written.
            try await store.commit(StoreBatch(forgetEvents: ForgetEvents(before: 350, limit: 1), events: [Self.event("bob", "b1", at: 600)]))
            #expect(try await left() == [200, 300, 400, 500, 600])
            try await store.commit(StoreBatch(forgetEvents: ForgetEvents(before: 350, limit: 2)))
            #expect(try await left() == [400, 500, 600])
            // Nothing expired: nothing goes.
            try await store.commit(StoreBatch(forgetEvents: ForgetEvents(before: 350, limit: 100)))
            #expect(try await left() == [400, 500, 600])
            // Only the oldest `limit` rows are looked at: a later row's age does not matter.
            try await store.commit(StoreBatch(forgetEvents: ForgetEvents(before: 10_000, limit: 2)))
            #expect(try await left() == [600])
            #expect(try await store.summary().events == 1)
        }
    }

    /// What a restart reads of the conversations: every row with its latest messages,
    /// oldest first, in one call.
    @Test(arguments: Backend.allCases)
    func conversationsWithTheirLatestMessagesInOneCall(_ backend: Backend) async throws {
        try await withStore(backend) { store, _ in
            func conversation(_ key: String) -> EntityRow {
                EntityRow(kind: EntityKind.conversation, key: key, version: 1, body: Array(#"{"k":"\#(key)"}"#.utf8), updatedAt: 5)
            }
            func message(_ key: String, _ seq: Int64) -> DMMessageRow {
                DMMessageRow(conversation: key, seq: seq, id: "\(key)-\(seq)", sender: "alice", text: "t\(seq)", sentAt: seq, isRead: false)
            }
            try await store.commit(StoreBatch(
                entities: [conversation("a|b"), conversation("a|c"), conversation("b|c"), Self.room("r1", version: 1)],
                messages: (1...5).map { message("a|b", $0) } + (1...2).map { message("b|c", $0) } + [message("x|y", 1)]))
            let loaded = try await store.loadConversations(messageLimit: 3)
            #expect(loaded.map(\.row.key) == ["a|b", "a|c", "b|c"])
            #expect(loaded.map(\.row) == [conversation("a|b"), conversation("a|c"), conversation("b|c")])
            #expect(loaded.map { $0.latestMessages.map(\.seq) } == [[3, 4, 5], [], [1, 2]])
            #expect(loaded[0].latestMessages == (3...5).map { message("a|b", $0) })
        }
    }

    @Test(arguments: Backend.allCases)
    func aBatchIsAllOrNothing(_ backend: Backend) async throws {
        try await withStore(backend) { store, _ in
            try await store.commit(StoreBatch(messages: [Self.message(1, sentAt: 100)]))
            // Message seq 1 again: the whole batch fails, its other rows are not written.
            await #expect(throws: (any Error).self) {
                try await store.commit(StoreBatch(
                    seenIds: [Self.seen("bob", "x", at: 200)], events: [Self.event("bob", "x", at: 200)],
                    entities: [Self.room("r9", version: 1)], messages: [Self.message(2, sentAt: 200), Self.message(1, sentAt: 200)]))
            }
            #expect(try await store.loadSeenIds(since: 0).isEmpty)
            #expect(try await Self.allEvents(store).isEmpty)
            #expect(try await store.loadEntities(kind: EntityKind.room).isEmpty)
            #expect(try await store.latestMessages(conversation: "alice|bob", limit: 10).map(\.seq) == [1])
            // The store goes on working after the failed batch.
            try await store.commit(StoreBatch(messages: [Self.message(2, sentAt: 300)]))
            #expect(try await store.latestMessages(conversation: "alice|bob", limit: 10).map(\.seq) == [1, 2])
        }
    }

    @Test(arguments: Backend.allCases)
    func historyPagesAndReadMarks(_ backend: Backend) async throws {
        try await withStore(backend) { store, _ in
            let first = (1...5).map { Self.message(Int64($0), sender: $0 % 2 == 0 ? "bob" : "alice", sentAt: Int64($0) * 100) }
            try await store.commit(StoreBatch(messages: first))
            // A read mark and a message appended in the same batch: the new one stays unread
            // (marks apply up to their seq, after the batch's messages).
            try await store.commit(StoreBatch(
                messages: [Self.message(6, sender: "alice", sentAt: 600)],
                readMarks: [DMReadMark(conversation: "alice|bob", sender: "alice", throughSeq: 5)]))
            let all = try await store.latestMessages(conversation: "alice|bob", limit: 10)
            #expect(all.map(\.seq) == [1, 2, 3, 4, 5, 6])
            #expect(all.map(\.isRead) == [true, false, true, false, true, false])
            #expect(try await store.latestMessages(conversation: "alice|bob", limit: 2).map(\.seq) == [5, 6])

            // Pages newest first, strictly before a time, limited in SQL.
            #expect(try await store.messages(conversation: "alice|bob", before: nil, limit: 3).map(\.seq) == [6, 5, 4])
            #expect(try await store.messages(conversation: "alice|bob", before: 400, limit: 10).map(\.seq) == [3, 2, 1])
            #expect(try await store.messages(conversation: "carol|dave", before: nil, limit: 10).isEmpty)

            // The query reader is a store of its own that sees what was committed.
            let reader = try await store.queryReader()
            #expect(reader.epoch == store.epoch)
            #expect(try await reader.messages(conversation: "alice|bob", before: nil, limit: 1).map(\.seq) == [6])
            try await store.commit(StoreBatch(messages: [Self.message(7, sentAt: 700)]))
            #expect(try await reader.messages(conversation: "alice|bob", before: nil, limit: 1).map(\.seq) == [7])
            await reader.close()
        }
    }

    @Test(arguments: Backend.allCases)
    func roomHistoryIsPagedForMembersAndARoomIsRebuiltAtAnyKeptVersion(_ backend: Backend) async throws {
        try await withStore(backend) { store, place in
            func frame(_ x: Double) -> Frame { Frame(x: x, y: 2.5, width: 3, height: 4) }
            func row(_ version: Int64, _ type: RoomChange.Kind, _ sticker: String?, x: Double? = nil, by user: String? = "alice", at loggedAt: Millis = 1_000) -> RoomHistoryRow {
                RoomHistoryRow(roomId: "r1", version: version, eventId: user.map { "\($0)-\(version)" }, userId: user, type: type, stickerId: sticker,
                               timestamp: 100 + version, loggedAt: loggedAt, image: x == nil ? nil : "img\(version).png", frame: x.map(frame))
            }
            func checkpoint(_ version: Int64, _ stickers: [Sticker], at loggedAt: Millis = 1_000) -> RoomCheckpointRow {
                RoomCheckpointRow(roomId: "r1", version: version, loggedAt: loggedAt,
                                  body: RoomHistory.checkpointBody(roomId: "r1", version: version, updatedAt: 0, stickers: stickers))
            }
            let owner = RoomMemberRow(roomId: "r1", userId: "alice", role: "owner", since: 1, invitedBy: nil, position: 0)
            // 1 create s1, 2 create s2, 3 update s1, 4 expire s1, 5 delete s2, 6 invite bob (no sticker).
            try await store.commit(StoreBatch(
                entities: [Self.room("r1", version: 6)], roomMembers: [RoomMembersRow(roomId: "r1", members: [owner])],
                roomHistory: [row(1, .create, "s1", x: 1), row(2, .create, "s2", x: 2), row(3, .update, "s1", x: 9), row(4, .expire, "s1", by: nil),
                              row(5, .delete, "s2"), row(6, .invite, nil)],
                roomCheckpoints: [checkpoint(0, [])]))

            let page = try #require(try await store.roomHistory(room: "r1", user: "alice", before: nil, limit: 4))
            #expect(page.version == 6)
            #expect(page.oldest == 1)  // the checkpoint at 0 makes version 1 the oldest restorable
            #expect(page.entries.map(\.version) == [6, 5, 4, 3])
            #expect(page.entries[2].eventId == nil && page.entries[2].userId == nil)
            #expect(page.entries[0].stickerId == nil)
            #expect(try await store.roomHistory(room: "r1", user: "alice", before: 3, limit: 50)?.entries.map(\.version) == [2, 1])
            #expect(try await store.roomHistory(room: "r1", user: "mallory", before: nil, limit: 50) == nil)
            #expect(try await store.roomHistory(room: "nowhere", user: "alice", before: nil, limit: 50) == nil)

            let at3 = try #require(try await store.roomStickers(room: "r1", at: 3))
            #expect(at3.map(\.id) == ["s1", "s2"])
            #expect(at3.map(\.frame) == [frame(9), frame(2)])
            #expect(at3.map(\.image) == ["img3.png", "img2.png"])
            #expect(at3.allSatisfy { $0.createdBy == "alice" })
            #expect(try await store.roomStickers(room: "r1", at: 5)?.map(\.id) == ["s1"])

            func at6() -> [Sticker] { [Sticker(id: "s1", image: "img3.png", frame: frame(9), owner: nil, createdBy: "alice", updatedBy: "alice", updatedAt: 0)] }
            // A later checkpoint serves the versions after it; the retention keeps each
            // room's newest checkpoint before the cutoff and everything above it.
            try await store.commit(StoreBatch(
                roomHistory: [row(7, .create, "s3", x: 3, at: 5_000)], roomCheckpoints: [checkpoint(6, at6(), at: 2_000)]))
            #expect(try await store.roomStickers(room: "r1", at: 7)?.map(\.id) == ["s1", "s3"])
            try await store.commit(StoreBatch(forgetHistory: ForgetHistory(before: 3_000, limit: 100)))
            #expect(try await store.roomStickers(room: "r1", at: 3) == nil)
            #expect(try await store.roomStickers(room: "r1", at: 6)?.map(\.id) == ["s1"])
            let after = try #require(try await store.roomHistory(room: "r1", user: "alice", before: nil, limit: 50))
            #expect(after.oldest == 6)
            #expect(after.entries.map(\.version) == [7, 6])

            // It survives reopening.
            await store.close()
            let again = try await place.open()
            #expect(try await again.roomStickers(room: "r1", at: 7)?.map(\.id) == ["s1", "s3"])
            await again.close()
        }
    }

    @Test(arguments: Backend.allCases)
    func backupIsForSQLiteAlone(_ backend: Backend) async throws {
        try await withStore(backend) { store, _ in
            try await store.commit(StoreBatch(entities: [Self.room("r1", version: 1)]))
            let target = try makeTemporaryDirectory(prefix: "backup-") + "/copy.sqlite"
            switch backend {
            case .sqlite:
                try await store.backup(to: target)
                let copy = try SQLiteStore.open(path: target)
                #expect(copy.epoch == store.epoch)
                #expect(try await copy.loadEntities(kind: EntityKind.room).count == 1)
                await copy.close()
            case .postgres:
                let error = await #expect(throws: PostgresStoreError.self) { try await store.backup(to: target) }
                #expect(error?.description.contains("pg_dump") == true)
            }
        }
    }
}
