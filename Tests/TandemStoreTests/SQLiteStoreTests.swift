import Foundation
import Testing
import TandemCore
@testable import TandemStore

@Suite struct SQLiteStoreTests {
    // MARK: Fixtures

    static func seen(_ user: String, _ id: String, at: Millis, kind: Receipt.Kind = .room) -> SeenId {
        SeenId(userId: user, id: id, kind: kind, seenAt: at)
    }

    static func event(_ user: String, _ id: String, at: Millis, version: Int64? = 1) -> EventLogRow {
        EventLogRow(at: at, kind: .room, userId: user, target: "r1", id: id, status: .accepted, code: nil,
                    version: version, payload: Array(#"{"eventId":"\#(id)"}"#.utf8))
    }

    static func message(_ conversation: String, _ seq: Int64, sender: String = "alice", sentAt: Millis,
                        isRead: Bool = false) -> DMMessageRow {
        DMMessageRow(conversation: conversation, seq: seq, id: "m\(seq)", sender: sender, text: "hello \(seq)",
                     sentAt: sentAt, isRead: isRead)
    }

    static let run = LogbookRow(userId: "alice", workoutId: "w1", startedAt: 1_000, endedAt: 61_000, origin: "watch",
                                mode: "mirrored", distance: 5_000, elapsedTime: 1_500, averagePace: 300,
                                averageHeartRate: 151.5, maxHeartRate: 178)

    static let sampleBatch = StoreBatch(
        seenIds: [seen("alice", "e1", at: 100)],
        events: [event("alice", "e1", at: 100)],
        entities: [EntityRow(kind: EntityKind.room, key: "r1", version: 1, body: Array("{}".utf8), updatedAt: 100)],
        messages: [message("alice|bob", 1, sentAt: 100)],
        logbook: [run]
    )

    // MARK: Lifecycle

    @Test func reopeningKeepsTheEpochAndTheData() async throws {
        try await withTemporaryDirectory { dir in
            // The parent directory does not exist yet: open creates it.
            let path = "\(dir)/nested/data/tandem.sqlite"
            let store = try SQLiteStore.open(path: path)
            let epoch = store.epoch
            #expect(epoch.count == 16 && epoch.allSatisfy(\.isHexDigit))
            try await store.commit(Self.sampleBatch)
            await store.close()

            let reopened = try SQLiteStore.open(path: path)
            #expect(reopened.epoch == epoch)
            #expect(reopened.createdAt == store.createdAt)
            #expect(try await reopened.loadEntities(kind: EntityKind.room) == Self.sampleBatch.entities)
            #expect(try await reopened.latestMessages(conversation: "alice|bob", limit: 10) == Self.sampleBatch.messages)
            let summary = try await reopened.summary()
            #expect(summary.schemaVersion == Int32(SQLiteStore.migrations.count))
            #expect(summary.epoch == epoch)
            #expect((summary.rooms, summary.messages, summary.events, summary.seenIds, summary.logbookRows) == (1, 1, 1, 1, 1))
            #expect(summary.fileBytes > 0)
            await reopened.close()

            // A different database gets a different epoch.
            let other = try SQLiteStore.open(path: "\(dir)/other.sqlite")
            #expect(other.epoch != epoch)
        }
    }

    /// CONTRACT "Room membership": rooms that existed before it get members, once, by
    /// its rule: every user with an accepted event in the room is an editor, the one
    /// with the earliest accepted event its owner (rejected events make nobody a member).
    @Test func theUpgradeMakesMembersOfEveryoneWithAnAcceptedEvent() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/tandem.sqlite"
            let old = try SQLiteStore.open(path: path, migrations: Array(SQLiteStore.migrations.prefix(3)))
            func event(_ user: String, _ room: String, _ id: String, at: Millis, _ status: Receipt.Status = .accepted) -> EventLogRow {
                EventLogRow(at: at, kind: .room, userId: user, target: room, id: id, status: status, code: status == .accepted ? nil : .ownedByOther,
                            version: 1, payload: nil)
            }
            try await old.commit(StoreBatch(
                events: [event("bob", "party", "b1", at: 10), event("alice", "party", "a1", at: 11), event("bob", "party", "b2", at: 12),
                         event("mallory", "party", "m1", at: 13, .rejected), event("carol", "party", "c1", at: 14),
                         event("dave", "gone", "d1", at: 15)],
                entities: [EntityRow(kind: EntityKind.room, key: "party", version: 4, body: [1], updatedAt: 14)]))
            await old.close()

            let store = try SQLiteStore.open(path: path)
            #expect(try await store.loadRoomMembers() == [
                RoomMemberRow(roomId: "party", userId: "bob", role: "owner", since: 10, invitedBy: nil, position: 0),
                RoomMemberRow(roomId: "party", userId: "alice", role: "editor", since: 11, invitedBy: nil, position: 1),
                RoomMemberRow(roomId: "party", userId: "carol", role: "editor", since: 14, invitedBy: nil, position: 2),
            ], "a room with no row (gone) gets no members")
            await store.close()
        }
    }

    @Test func migratesAnOlderDatabaseKeepingItsData() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/tandem.sqlite"
            let old = try SQLiteStore.open(path: path, migrations: Array(SQLiteStore.migrations.prefix(1)))
            // Seen ids as version 1 wrote them (no outcome columns yet), the rest as today.
            var batch = Self.sampleBatch
            batch.seenIds = []
            try await old.commit(batch)
            #expect(try await old.summary().schemaVersion == 1)
            let epoch = old.epoch
            await old.close()
            let v1 = try SQLiteConnection(path: path)
            for seen in Self.sampleBatch.seenIds {
                try v1.run("INSERT INTO seen_ids(user_id, id, kind, seen_at) VALUES (?1, ?2, ?3, ?4)",
                           [.text(seen.userId), .text(seen.id), .text(seen.kind.rawValue), .integer(seen.seenAt)])
            }
            v1.close()

            let store = try SQLiteStore.open(path: path)
            let summary = try await store.summary()
            #expect(summary.schemaVersion == Int32(SQLiteStore.migrations.count))
            #expect(summary.epoch == epoch)
            #expect(try await store.loadSeenIds(since: 0) == Self.sampleBatch.seenIds)
            #expect(try await store.logbook(user: "alice") == [Self.run])
            // Migration 2's index is there.
            let check = try SQLiteConnection(path: path)
            #expect(try check.queryOne("SELECT count(*) FROM sqlite_schema WHERE name = 'seen_ids_by_time'") { $0.int64(0) } == 1)
        }
    }

    @Test func aDatabaseFromNewerCodeIsRefusedClearly() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/tandem.sqlite"
            do {
                let db = try SQLiteConnection(path: path)
                try db.execute("PRAGMA user_version = 99")
            }
            let error = try #require(throws: MigrationError.self) { try SQLiteStore.open(path: path) }
            #expect(error.code == .databaseNewerThanCode)
            #expect(error.message.contains("schema version 99"))
            #expect(error.message.contains("up to \(SQLiteStore.migrations.count)"))
        }
    }

    @Test func aCorruptFileIsAnErrorNotACrash() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/garbage.sqlite"
            var generator = SystemRandomNumberGenerator()
            let garbage = (0..<8_192).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            try Data(garbage).write(to: URL(fileURLWithPath: path))
            let error = try #require(throws: SQLiteError.self) { try SQLiteStore.open(path: path) }
            #expect(error.code == .notADatabase)
            #expect(error.message.contains("not a database"))
            #expect(error.context.contains(path))
        }
    }

    @Test func aDamagedDatabaseFailsTheIntegrityCheck() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/tandem.sqlite"
            let store = try SQLiteStore.open(path: path)
            let many = (0..<400).map { Self.seen("u\($0)", "e\($0)", at: Millis($0)) }
            try await store.commit(StoreBatch(seenIds: many))
            #expect(try await store.integrityCheck() == "ok")
            try await store.backup(to: "\(dir)/copy.sqlite")
            await store.close()

            // Overwrite a page in the middle of the copy (not the header) with garbage.
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(dir)/copy.sqlite"))
            try handle.seek(toOffset: 4_096 * 2)
            try handle.write(contentsOf: Data(repeating: 0xA5, count: 4_096))
            try handle.close()
            let damaged: String
            do {
                let copy = try SQLiteStore.open(path: "\(dir)/copy.sqlite")
                damaged = try await copy.integrityCheck()
            } catch let error as SQLiteError {
                // Depending on which page was hit, reading the schema already fails.
                #expect(error.code == .corrupt)
                #expect(error.context.contains("copy.sqlite"))
                damaged = error.description
            }
            #expect(damaged != "ok")
        }
    }

    // MARK: Batches

    @Test func aFailedBatchLeavesNothingBehind() async throws {
        try await withTemporaryDirectory { dir in
            let store = try SQLiteStore.open(path: "\(dir)/tandem.sqlite")
            var batch = Self.sampleBatch
            // The second message reuses seq 1: it fails after everything before it was written.
            batch.messages.append(Self.message("alice|bob", 1, sentAt: 101))
            let error = try await #require(throws: SQLiteError.self) { try await store.commit(batch) }
            #expect(error.code == .constraint)
            #expect(error.context.contains("INSERT INTO dm_messages"))

            let summary = try await store.summary()
            #expect((summary.rooms, summary.messages, summary.events, summary.seenIds, summary.logbookRows) == (0, 0, 0, 0, 0))
            // And the store is usable afterwards.
            try await store.commit(Self.sampleBatch)
            #expect(try await store.summary().events == 1)
        }
    }

    @Test func everyTableRoundTrips() async throws {
        try await withTemporaryDirectory { dir in
            let store = try SQLiteStore.open(path: "\(dir)/tandem.sqlite")
            let rejected = EventLogRow(at: 200, kind: .dm, userId: "bob", target: "alice|bob", id: "", status: .rejected,
                                       code: .invalidPayload, version: nil, payload: nil)
            let noSummary = LogbookRow(userId: "alice", workoutId: "w2", startedAt: 5_000, endedAt: 6_000, origin: "phone",
                                       mode: "standalone", distance: 0, elapsedTime: 0, averagePace: nil,
                                       averageHeartRate: nil, maxHeartRate: nil)
            try await store.commit(StoreBatch(
                seenIds: [Self.seen("alice", "e1", at: 100), Self.seen("bob", "c1", at: 150, kind: .dm)],
                events: [Self.event("alice", "e1", at: 100), rejected],
                entities: [
                    EntityRow(kind: EntityKind.room, key: "r1", version: 1, body: Array("room v1".utf8), updatedAt: 100),
                    EntityRow(kind: EntityKind.conversation, key: "alice|bob", version: 3, body: [], updatedAt: 150),
                    EntityRow(kind: EntityKind.workout, key: "alice/w1", version: 9, body: [0, 1, 2], updatedAt: 160),
                ],
                messages: [Self.message("alice|bob", 1, sentAt: 100), Self.message("alice|bob", 2, sender: "bob", sentAt: 110)],
                // Appended and read in the same batch: ends up read.
                readMarks: [DMReadMark(conversation: "alice|bob", sender: "alice")],
                logbook: [Self.run, noSummary]
            ))
            // A second batch: the room is replaced, a seen id repeats (keeps its first time).
            try await store.commit(StoreBatch(
                seenIds: [Self.seen("alice", "e1", at: 999)],
                entities: [EntityRow(kind: EntityKind.room, key: "r1", version: 2, body: Array("room v2".utf8), updatedAt: 300)],
                readMarks: [DMReadMark(conversation: "alice|bob", sender: "bob"), DMReadMark(conversation: "nobody", sender: "x")]
            ))

            #expect(try await store.loadSeenIds(since: 0) == [
                Self.seen("alice", "e1", at: 100), Self.seen("bob", "c1", at: 150, kind: .dm),
            ])
            var expectedEvents = [Self.event("alice", "e1", at: 100), rejected]
            expectedEvents[0].seq = 1
            expectedEvents[1].seq = 2
            #expect(try await store.eventLog() == expectedEvents)
            #expect(try await store.eventLog(after: 1) == [expectedEvents[1]])
            #expect(try await store.loadEntities(kind: EntityKind.room) == [
                EntityRow(kind: EntityKind.room, key: "r1", version: 2, body: Array("room v2".utf8), updatedAt: 300),
            ])
            #expect(try await store.loadEntities(kind: EntityKind.conversation).map(\.body) == [[]])
            #expect(try await store.loadEntities(kind: EntityKind.workout).map(\.version) == [9])
            let messages = try await store.latestMessages(conversation: "alice|bob", limit: 200)
            #expect(messages.map(\.seq) == [1, 2])
            #expect(messages.allSatisfy { $0.isRead })
            #expect(messages[1] == Self.message("alice|bob", 2, sender: "bob", sentAt: 110, isRead: true))
            #expect(try await store.logbook(user: "alice") == [noSummary, Self.run])
            #expect(try await store.logbook(user: "bob") == [])

            let summary = try await store.summary()
            #expect((summary.rooms, summary.conversations, summary.workouts) == (1, 1, 1))
            #expect((summary.messages, summary.events, summary.seenIds, summary.logbookRows) == (2, 2, 2, 2))
        }
    }

    @Test func pruningForgetsOnlyOldSeenIds() async throws {
        try await withTemporaryDirectory { dir in
            let store = try SQLiteStore.open(path: "\(dir)/tandem.sqlite")
            let ids = (0..<10).map { Self.seen("alice", "e\($0)", at: Millis($0) * 1_000) }
            try await store.commit(StoreBatch(seenIds: ids))
            #expect(try await store.pruneSeenIds(olderThan: 4_000) == 4)
            #expect(try await store.pruneSeenIds(olderThan: 4_000) == 0)
            #expect(try await store.loadSeenIds(since: 0) == Array(ids[4...]))
            #expect(try await store.loadSeenIds(since: 8_000) == Array(ids[8...]))
        }
    }

    @Test func aSeenIdKeepsItsFirstOutcome() async throws {
        try await withTemporaryDirectory { dir in
            let store = try SQLiteStore.open(path: "\(dir)/tandem.sqlite")
            let accepted = SeenId(userId: "alice", id: "e1", kind: .room, seenAt: 10, original: Receipt.Original(status: .accepted, code: nil, version: 4))
            let rejected = SeenId(userId: "bob", id: "e1", kind: .room, seenAt: 11, original: Receipt.Original(status: .rejected, code: .ownedByOther, version: 4))
            let unknown = SeenId(userId: "carol", id: "c1", kind: .dm, seenAt: 12)
            try await store.commit(StoreBatch(seenIds: [accepted, rejected, unknown]))
            #expect(try await store.loadSeenIds(since: 0) == [accepted, rejected, unknown])
        }
    }

    @Test func pagingThroughMessageHistory() async throws {
        try await withTemporaryDirectory { dir in
            let store = try SQLiteStore.open(path: "\(dir)/tandem.sqlite")
            let all = (1...25).map { Self.message("alice|bob", Int64($0), sentAt: Millis($0) * 10) }
            try await store.commit(StoreBatch(messages: all + [Self.message("carol|dave", 1, sentAt: 5)]))

            #expect(try await store.latestMessages(conversation: "alice|bob", limit: 5) == Array(all[20...]))
            #expect(try await store.latestMessages(conversation: "alice|bob", limit: 100) == all)

            // By time, newest first, page after page until empty.
            var pages: [[DMMessageRow]] = []
            var before: Millis? = nil
            while true {
                let page = try await store.messages(conversation: "alice|bob", before: before, limit: 10)
                if page.isEmpty { break }
                pages.append(page)
                before = page.last?.sentAt
            }
            #expect(pages.map(\.count) == [10, 10, 5])
            #expect(Array(pages.joined()) == all.reversed())

            // By seq, the same, with no ambiguity on equal times.
            #expect(try await store.messages(conversation: "alice|bob", beforeSeq: 21, limit: 3).map(\.seq) == [20, 19, 18])
            #expect(try await store.messages(conversation: "alice|bob", beforeSeq: nil, limit: 1).map(\.seq) == [25])
            #expect(try await store.messages(conversation: "nobody", before: nil, limit: 10) == [])
        }
    }

    // MARK: Operations

    @Test func backupIsAConsistentOpenableCopy() async throws {
        try await withTemporaryDirectory { dir in
            let store = try SQLiteStore.open(path: "\(dir)/tandem.sqlite")
            try await store.commit(Self.sampleBatch)
            #expect(try await store.integrityCheck() == "ok")
            try await store.backup(to: "\(dir)/backups/1.sqlite")
            // The live store keeps working, and refuses to overwrite a backup.
            try await store.commit(StoreBatch(seenIds: [Self.seen("bob", "e9", at: 500)]))
            await #expect(throws: SQLiteError.self) { try await store.backup(to: "\(dir)/backups/1.sqlite") }

            let copy = try SQLiteStore.open(path: "\(dir)/backups/1.sqlite")
            #expect(copy.epoch == store.epoch)
            #expect(try await copy.integrityCheck() == "ok")
            #expect(try await copy.summary().seenIds == 1)
            #expect(try await copy.loadEntities(kind: EntityKind.room) == Self.sampleBatch.entities)
        }
    }

    @Test func aClosedStoreThrows() async throws {
        try await withTemporaryDirectory { dir in
            let store = try SQLiteStore.open(path: "\(dir)/tandem.sqlite")
            await store.close()
            let error = try await #require(throws: SQLiteError.self) { try await store.summary() }
            #expect(error.code == .misuse)
        }
    }
}
