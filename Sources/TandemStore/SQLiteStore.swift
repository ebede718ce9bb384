import CSQLite
import TandemCore

/// Tandem's database: the one owner of one `SQLiteConnection`.
///
/// Everything crosses the actor boundary as Sendable values (`StoreBatch`, `EntityRow`,
/// ...); the connection never leaves. Calls are synchronous SQLite work run on the actor,
/// whose executor is a serial dispatch queue of its own (`QueueExecutor`) rather than Swift's cooperative
/// pool: a commit that waits on the disk, on the busy timeout or on a checkpoint blocks
/// one dispatch thread, never one of the few threads the pipeline and everything else
/// run on (two on a 2-core machine). See `SQLiteConnection` for durability.
public actor SQLiteStore {
    /// Made once when the database was created; every snapshot carries it.
    public nonisolated let epoch: String
    /// When the database was created (milliseconds since the Unix epoch).
    public nonisolated let createdAt: Millis
    public nonisolated let path: String
    private let connection: SQLiteConnection
    private let executor: any SerialExecutor
    /// The connection's busy timeout, as opened.
    private let busyTimeoutMs: Int32
    /// On an executor of the caller's: waits for the write lock as a sleeping task, not
    /// in SQLite's busy handler (``commit(_:)``).
    private let yieldsWhileBusy: Bool

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Opens the database at `path`, creating it and its parent directory if missing, and
    /// brings the schema up to date.
    ///
    /// Throws `SQLiteError` when the file cannot be opened or is not a (sound) database,
    /// and `MigrationError` when it was written by a newer Tandem.
    ///
    /// `checkpoints`: `.automatic` lets a commit checkpoint the WAL when it has grown
    /// (SQLite's default); `.separate` leaves that to a checkpointer
    /// (``openCheckpointer(path:)``), so that no commit ever waits for one.
    ///
    /// `executor`: where the store's work runs; nil: a serial dispatch queue of its own.
    /// The coordinator's writer runs on its pipeline's own thread (a `PollLoop`), so that
    /// a commit is a call on the thread that asked for it, not two thread switches.
    public static func open(
        path: String, synchronous: SQLiteConnection.Synchronous = .normal, checkpoints: Checkpoints = .automatic,
        executor: (any SerialExecutor)? = nil
    ) throws -> SQLiteStore {
        try SQLiteStore(path: path, migrations: migrations, options: writerOptions(synchronous: synchronous, checkpoints: checkpoints), executor: executor)
    }

    static func writerOptions(synchronous: SQLiteConnection.Synchronous, checkpoints: Checkpoints) -> SQLiteConnection.Options {
        var options = SQLiteConnection.Options()
        options.synchronous = synchronous
        if checkpoints == .separate {
            options.autoCheckpoint = false
            options.journalSizeLimitBytes = walSizeLimitBytes
            // A failed commit stops the coordinator; waiting never does. Only another
            // process can hold the write lock (an operator's shell): wait long for it.
            options.busyTimeoutMilliseconds = writerBusyTimeoutMs
        }
        return options
    }

    /// How long the writer of a database with a separate checkpointer waits for the write
    /// lock before its commit fails.
    public static let writerBusyTimeoutMs: Int32 = 30_000
    /// `journal_size_limit` of a writer with a separate checkpointer: the first commit into
    /// a restarted WAL cuts the file back to this. Above what the WAL reaches between two
    /// restarts at full load (``WALCheckpointer``), so the steady state does not
    /// truncate and grow the file every time; an excursion is cut back.
    public static let walSizeLimitBytes: Int64 = 32 << 20

    public enum Checkpoints: Sendable {
        case automatic
        case separate
    }

    /// A connection that only checkpoints (``checkpoint()``), beside a writer opened with
    /// `checkpoints: .separate`: the WAL is copied into the database off the commit path,
    /// on a dispatch thread of its own, while the writer goes on appending.
    public static func openCheckpointer(path: String) throws -> SQLiteStore {
        var options = SQLiteConnection.Options()
        options.autoCheckpoint = false
        return try SQLiteStore(path: path, migrations: nil, options: options)
    }

    /// A second, read-only connection to a database another `SQLiteStore` keeps open
    /// and up to date: WAL lets it read the last committed state while the writer
    /// commits, so queries (DM history, logbook) never wait in the write pipeline. It
    /// runs no migrations.
    public static func openReader(path: String) throws -> SQLiteStore {
        var options = SQLiteConnection.Options()
        options.readOnly = true
        return try SQLiteStore(path: path, migrations: nil, options: options)
    }

    /// Opens with a chosen migration list: tests use it to build an older schema.
    static func open(path: String, migrations: [Migration]) throws -> SQLiteStore {
        try SQLiteStore(path: path, migrations: migrations, options: SQLiteConnection.Options())
    }

    /// Opens with chosen options (tests: a small `journal_size_limit`).
    static func open(path: String, options: SQLiteConnection.Options) throws -> SQLiteStore {
        try SQLiteStore(path: path, migrations: migrations, options: options)
    }

    private init(path: String, migrations: [Migration]?, options: SQLiteConnection.Options, executor: (any SerialExecutor)? = nil) throws {
        let connection: SQLiteConnection
        let values: [String: String]
        do {
            if !options.readOnly { try Platform.createParentDirectory(of: path) }
            connection = try SQLiteConnection(path: path, options: options)
            if let migrations { try connection.migrate(migrations) }
            let meta = try connection.query("SELECT key, value FROM meta WHERE key IN ('epoch', 'created_at')") {
                ($0.text(0), $0.text(1))
            }
            values = Dictionary(meta, uniquingKeysWith: { _, last in last })
        } catch var error as SQLiteError {
            // Whatever failed while opening, say which database it was.
            if !error.context.hasPrefix("open \(path)") { error.context = "open \(path): \(error.context)" }
            throw error
        }
        guard let epoch = values["epoch"], !epoch.isEmpty else {
            throw SQLiteError(code: .corrupt, message: "meta has no epoch", context: "open \(path)")
        }
        self.epoch = epoch
        self.createdAt = values["created_at"].flatMap { Millis($0) } ?? 0
        self.path = path
        self.connection = connection
        self.busyTimeoutMs = options.busyTimeoutMilliseconds
        self.executor = executor ?? QueueExecutor(label: "tandem.store \(options.readOnly ? "reader" : "writer") \(path)")
        // On the caller's thread: a commit never blocks it on another connection's lock.
        yieldsWhileBusy = executor != nil
    }

    /// The database's number of partitions, recorded with it at its creation: `configured`
    /// on a new database (recorded now), 1 on one made before partitions existed. Throws
    /// ``PartitionsMismatch`` when `configured` differs, having written nothing.
    @discardableResult
    public func fixPartitions(_ configured: Int) throws -> Int {
        let recorded = try recordedPartitions()
        let holdsData = try connection.queryOne(PartitionsMismatch.holdsDataSQL) { $0.int64(0) } == 1
        let (partitions, record) = try PartitionsMismatch.settle(recorded: recorded, holdsData: holdsData, configured: configured, database: path)
        if record {
            try connection.run("INSERT INTO meta(key, value) VALUES ('partitions', ?1) ON CONFLICT(key) DO NOTHING", [.text(String(partitions))])
        }
        return partitions
    }

    private func recordedPartitions() throws -> String? {
        try connection.queryOne(PartitionsMismatch.recordedSQL) { $0.text(0) }
    }

    /// Closes the database. Every later call throws (`SQLITE_MISUSE`, "the connection is closed").
    public func close() {
        connection.close()
    }

    // MARK: Writing

    /// Writes everything of one coordinator batch in one transaction: all of it or none.
    /// See `StoreBatch` for the order. Seen ids already present keep their first time;
    /// entities and logbook rows are upserts; a message seq written twice fails the batch.
    ///
    /// A store on an executor of the caller's (``open(path:synchronous:checkpoints:executor:)``)
    /// does not wait for another connection's write lock on its thread, which also reads
    /// the broker: the commit runs with a busy timeout of zero, and one that finds the lock taken
    /// sleeps as a task (1, 2, 4 ... 50 ms) and tries again, the thread free meanwhile,
    /// until the busy timeout it was opened with has passed.
    public func commit(_ batch: StoreBatch) async throws {
        guard !batch.isEmpty else { return }
        guard yieldsWhileBusy else { return try write(batch) }
        // Only the commit waits this way: the connection's other statements (recovery,
        // the partitions check) keep the busy timeout it was opened with.
        try connection.setBusyTimeout(0)
        defer { try? connection.setBusyTimeout(busyTimeoutMs) }
        var waitedMs: Int32 = 0
        var delayMs: Int32 = 1
        while true {
            do {
                return try write(batch)
            } catch let error as SQLiteError where error.code == .busy && !connection.isInTransaction && waitedMs < busyTimeoutMs {
                try await Task.sleep(for: .milliseconds(Int(delayMs)))
                // Whatever ran on the connection meanwhile restored its busy timeout.
                try connection.setBusyTimeout(0)
                waitedMs += delayMs
                delayMs = min(delayMs * 2, 50)
            }
        }
    }

    private func write(_ batch: StoreBatch) throws {
        try connection.transaction { db in
            if let forget = batch.forgetSeenIds {
                try db.run(Self.forgetSeenIds, [.integer(forget.before), .integer(Int64(forget.limit))])
            }
            // Only when the oldest row has expired: otherwise the DELETE reads `limit`
            // rows (at least 200) with every batch to delete none, some 200,000 row
            // visits a second at 2,000 events a second.
            if let forget = batch.forgetEvents,
               let oldest = try db.queryOne(Self.oldestEventAt, [], { $0.int64(0) }), oldest < forget.before {
                try db.run(Self.forgetEvents, [.integer(forget.before), .integer(Int64(forget.limit))])
            }
            for seen in batch.seenIds {
                try db.run(Self.insertSeenId, [
                    .text(seen.userId), .text(seen.id), .text(seen.kind.rawValue), .integer(seen.seenAt),
                    .optional(seen.original?.status.rawValue), .optional(seen.original?.code?.rawValue),
                    .optional(seen.original?.version),
                ])
            }
            for event in batch.events {
                try db.run(Self.insertEvent, [
                    .optional(event.seq), .integer(event.at), .text(event.kind.rawValue), .text(event.userId),
                    .text(event.target), .text(event.id), .text(event.status.rawValue),
                    .optional(event.code?.rawValue), .optional(event.version), .optional(event.payload),
                ])
            }
            for entity in batch.entities {
                try db.run(Self.upsertEntity, [
                    .text(entity.kind), .text(entity.key), .integer(entity.version), .blob(entity.body),
                    .integer(entity.updatedAt),
                ])
            }
            for message in batch.messages {
                try db.run(Self.insertMessage, [
                    .text(message.conversation), .integer(message.seq), .text(message.id), .text(message.sender),
                    .text(message.text), .integer(message.sentAt), .integer(message.isRead ? 1 : 0),
                ])
            }
            for mark in batch.readMarks {
                try db.run(Self.markRead, [.text(mark.conversation), .text(mark.sender), .integer(mark.throughSeq)])
            }
            for room in batch.roomMembers {
                try db.run(Self.deleteRoomMembers, [.text(room.roomId)])
                for member in room.members {
                    try db.run(Self.insertRoomMember, [
                        .text(member.roomId), .text(member.userId), .text(member.role), .integer(member.since),
                        .optional(member.invitedBy), .integer(Int64(member.position)),
                    ])
                }
            }
            if let forget = batch.forgetHistory {
                try db.run(RoomHistorySchema.forgetRows, [.integer(forget.before), .integer(Int64(forget.limit))])
                try db.run(RoomHistorySchema.forgetCheckpoints, [.integer(forget.before)])
            }
            for row in batch.roomHistory {
                try db.run(RoomHistorySchema.insertRow, [
                    .text(row.roomId), .integer(row.version), .optional(row.eventId), .optional(row.userId),
                    .text(row.type.rawValue), .optional(row.stickerId), .integer(row.timestamp), .integer(row.loggedAt),
                    .optional(row.image), .optional(row.frame?.x), .optional(row.frame?.y), .optional(row.frame?.width),
                    .optional(row.frame?.height),
                ])
            }
            for checkpoint in batch.roomCheckpoints {
                try db.run(RoomHistorySchema.insertCheckpoint, [
                    .text(checkpoint.roomId), .integer(checkpoint.version), .integer(checkpoint.loggedAt), .blob(checkpoint.body),
                ])
            }
            for row in batch.logbook {
                try db.run(Self.upsertLogbook, [
                    .text(row.userId), .text(row.workoutId), .integer(row.startedAt), .integer(row.endedAt),
                    .text(row.origin), .text(row.mode), .real(row.distance), .real(row.elapsedTime),
                    .optional(row.averagePace), .optional(row.averageHeartRate), .optional(row.maxHeartRate),
                ])
            }
        }
    }

    static let deleteRoomMembers = "DELETE FROM room_members WHERE room_id = ?1"
    static let insertRoomMember = """
        INSERT INTO room_members(room_id, user_id, role, since, invited_by, position) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
        """
    static let forgetSeenIds = """
        DELETE FROM seen_ids WHERE (user_id, id) IN (SELECT user_id, id FROM seen_ids WHERE seen_at < ?1 ORDER BY seen_at LIMIT ?2)
        """
    /// The time of the oldest row (the first of the table's b-tree): one row read.
    static let oldestEventAt = "SELECT at FROM event_log ORDER BY seq LIMIT 1"
    /// The oldest `limit` rows by `seq` (the start of the table's b-tree: a few pages),
    /// of which those processed before the cutoff. Never a scan of the table: with
    /// nothing expired it reads `limit` rows and deletes none (so it runs only when
    /// ``oldestEventAt`` is before the cutoff).
    static let forgetEvents = """
        DELETE FROM event_log WHERE seq IN (SELECT seq FROM event_log ORDER BY seq LIMIT ?2) AND at < ?1
        """
    static let insertSeenId = """
        INSERT INTO seen_ids(user_id, id, kind, seen_at, status, code, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
        ON CONFLICT(user_id, id) DO NOTHING
        """
    static let insertEvent = """
        INSERT INTO event_log(seq, at, kind, user_id, target, id, status, code, version, payload)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
        """
    static let upsertEntity = """
        INSERT INTO entities(kind, key, version, body, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
        ON CONFLICT(kind, key) DO UPDATE SET
            version = excluded.version, body = excluded.body, updated_at = excluded.updated_at
        """
    static let insertMessage = """
        INSERT INTO dm_messages(conversation, seq, id, sender, text, sent_at, is_read)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
        """
    static let markRead = "UPDATE dm_messages SET is_read = 1 WHERE conversation = ?1 AND sender = ?2 AND seq <= ?3 AND is_read = 0"
    static let upsertLogbook = """
        INSERT INTO logbook(user_id, workout_id, started_at, ended_at, origin, mode, distance, elapsed_time,
                            average_pace, average_heart_rate, max_heart_rate)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
        ON CONFLICT(user_id, workout_id) DO UPDATE SET
            started_at = excluded.started_at, ended_at = excluded.ended_at, origin = excluded.origin,
            mode = excluded.mode, distance = excluded.distance, elapsed_time = excluded.elapsed_time,
            average_pace = excluded.average_pace, average_heart_rate = excluded.average_heart_rate,
            max_heart_rate = excluded.max_heart_rate
        """

    /// `PRAGMA wal_checkpoint(PASSIVE)`, on a checkpointer (``openCheckpointer(path:)``):
    /// copies as much of the WAL into the database as it can without waiting for readers
    /// or the writer (which goes on appending); returns the WAL's size in frames (pages)
    /// and how many of them are now checkpointed. The writer starts the WAL over when a
    /// transaction of its own begins with every frame checkpointed: under load that
    /// never happens by itself (see ``restartWAL(waitingAtMostMs:)``).
    @discardableResult
    public func checkpoint() throws -> (walFrames: Int, checkpointed: Int) {
        try connection.queryOne("PRAGMA wal_checkpoint(PASSIVE)") { (Int($0.int64(1)), Int($0.int64(2))) } ?? (0, 0)
    }

    /// `PRAGMA wal_checkpoint(RESTART)` on the writer's own connection, between two
    /// commits: copies into the database what is left of the WAL (after a checkpointer's
    /// passive pass, the frames appended since: few), waits for readers still reading
    /// older frames, and starts the WAL over, so that the next commit writes from the
    /// beginning of the file (and `journal_size_limit` cuts it back). Returns false when
    /// a reader (or another process's checkpoint) held on longer than `waitingAtMostMs`:
    /// the WAL goes on growing until a later try.
    ///
    /// Why the writer and not the checkpointer: a passive checkpoint never catches up
    /// with a writer that commits every few milliseconds, so the WAL is never all
    /// checkpointed when a transaction begins, and it grows for ever. A restart needs the
    /// write lock. Taken by another connection, commits would wait for it on SQLite's
    /// busy handler, which sleeps in steps of up to 100 ms, and a checkpointer could
    /// wait its whole busy timeout for a gap between two commits; queued on the writer's
    /// own executor, the restart runs between two commits at once and the next commit
    /// starts right after it. Commits queued meanwhile wait for the tail's copy, the
    /// syncs and the readers: milliseconds, bounded by `waitingAtMostMs`.
    ///
    /// On an executor of the caller's the restart does not wait at all: readers still on
    /// older frames make it return false at once, and the next try comes a few passes later.
    public func restartWAL(waitingAtMostMs: Int32 = 1_000) throws -> Bool {
        try connection.setBusyTimeout(yieldsWhileBusy ? 0 : waitingAtMostMs)
        defer { try? connection.setBusyTimeout(busyTimeoutMs) }
        // (busy, log, checkpointed): busy 1 when someone held on past the timeout.
        let busy = try connection.queryOne("PRAGMA wal_checkpoint(RESTART)") { $0.int64(0) } ?? 1
        return busy == 0
    }

    /// Forgets seen ids first seen before `olderThan`; returns how many. (The
    /// coordinator forgets them a share at a time in its batches: `StoreBatch.forgetSeenIds`.)
    public func pruneSeenIds(olderThan: Millis) throws -> Int {
        try connection.run("DELETE FROM seen_ids WHERE seen_at < ?1", [.integer(olderThan)])
    }

    // MARK: Loading (recovery and history)

    /// Every entity of a kind (`EntityKind.room`, ...), in key order.
    public func loadEntities(kind: String) throws -> [EntityRow] {
        try connection.query(
            "SELECT kind, key, version, body, updated_at FROM entities WHERE kind = ?1 ORDER BY key",
            [.text(kind)]
        ) { row in
            EntityRow(kind: row.text(0), key: row.text(1), version: row.int64(2), body: row.blob(3),
                      updatedAt: row.int64(4))
        }
    }

    /// Every room's members, by room, in the order they joined.
    public func loadRoomMembers() throws -> [RoomMemberRow] {
        try connection.query(
            "SELECT room_id, user_id, role, since, invited_by, position FROM room_members ORDER BY room_id, position"
        ) { row in
            RoomMemberRow(roomId: row.text(0), userId: row.text(1), role: row.text(2), since: row.int64(3),
                          invitedBy: row.optionalText(4), position: Int(row.int64(5)))
        }
    }

    /// The seen ids first seen at or after `since`, in key order (user, id).
    ///
    /// A sequential scan of the table (`+seen_at` keeps SQLite off the time index): the
    /// table only holds the retention window, as the coordinator prunes it, so nearly
    /// every row qualifies, and walking the index would cost a primary-key lookup per
    /// row (3.5 s instead of well under one for a million ids).
    public func loadSeenIds(since: Millis) throws -> [SeenId] {
        try connection.query("\(Self.selectSeenId) WHERE +seen_at >= ?1", [.integer(since)], Self.seenId)
    }

    /// The time index's last entry: where a restart's memory window ends.
    public func latestSeenAt() throws -> Millis? {
        try connection.queryOne("SELECT max(seen_at) FROM seen_ids") { row in row.isNull(0) ? nil : row.int64(0) } ?? nil
    }

    /// The same rows as ``loadSeenIds(since:)``, as digests made from the text in
    /// SQLite's own buffers: no string per id. The coordinator reads only its memory
    /// window (minutes of a table that holds two days), so this one walks the time index.
    public func loadSeenDigests(since: Millis) throws -> IdDigests {
        var digests = IdDigests(since: since)
        try connection.withStatement("SELECT user_id, id, seen_at FROM seen_ids WHERE seen_at >= ?1") { statement in
            try statement.bind([.integer(since)])
            while try statement.step() {
                let row = statement.row
                digests.insert(user: row.textBytes(0), id: row.textBytes(1), seenAt: row.int64(2))
            }
        }
        digests.seal()
        return digests
    }

    public func seenId(user: String, id: String) throws -> SeenId? {
        try connection.queryOne("\(Self.selectSeenId) WHERE user_id = ?1 AND id = ?2", [.text(user), .text(id)], Self.seenId)
    }

    static let selectSeenId = "SELECT user_id, id, kind, seen_at, status, code, version FROM seen_ids"

    static func seenId(_ row: SQLiteRow) throws -> SeenId {
        var original: Receipt.Original?
        if let status = row.optionalText(4).flatMap(Receipt.Status.init(rawValue:)) {
            original = Receipt.Original(
                status: status, code: row.optionalText(5).flatMap(ReceiptCode.init(rawValue:)), version: row.optionalInt64(6))
        }
        return SeenId(userId: row.text(0), id: row.text(1), kind: try decode(row.text(2), column: "seen_ids.kind"),
                      seenAt: row.int64(3), original: original)
    }

    /// Event-log rows with `seq` above `after`, in commit order.
    public func eventLog(after seq: Int64 = 0, limit: Int = 1_000) throws -> [EventLogRow] {
        try connection.query(
            """
            SELECT seq, at, kind, user_id, target, id, status, code, version, payload
            FROM event_log WHERE seq > ?1 ORDER BY seq LIMIT ?2
            """,
            [.integer(seq), .integer(Int64(limit))]
        ) { row in
            EventLogRow(
                seq: row.int64(0), at: row.int64(1), kind: try Self.decode(row.text(2), column: "event_log.kind"),
                userId: row.text(3), target: row.text(4), id: row.text(5),
                status: try Self.decode(row.text(6), column: "event_log.status"),
                code: try row.optionalText(7).map { try Self.decode($0, column: "event_log.code") },
                version: row.optionalInt64(8), payload: row.optionalBlob(9)
            )
        }
    }

    /// The latest `limit` messages of a conversation, oldest first (as a snapshot lists them).
    public func latestMessages(conversation: String, limit: Int) throws -> [DMMessageRow] {
        try connection.query(
            "\(Self.selectMessage) WHERE conversation = ?1 ORDER BY seq DESC LIMIT ?2",
            [.text(conversation), .integer(Int64(limit))],
            Self.message
        ).reversed()
    }

    /// Every conversation with its latest messages: an indexed query each, inside this
    /// one call.
    public func loadConversations(messageLimit: Int) throws -> [StoredConversation] {
        try loadEntities(kind: EntityKind.conversation).map {
            StoredConversation(row: $0, latestMessages: try latestMessages(conversation: $0.key, limit: messageLimit))
        }
    }

    /// A page of older history: up to `limit` messages sent strictly before `sentAt` (all
    /// when nil), NEWEST FIRST — the order a client scrolling back fetches them in; ask for
    /// the next page with the `sentAt` of the last row. Messages sharing that exact `sentAt`
    /// across a page boundary would be skipped; page with `beforeSeq:` where that matters.
    public func messages(conversation: String, before sentAt: Millis?, limit: Int) throws -> [DMMessageRow] {
        try connection.query(
            "\(Self.selectMessage) WHERE conversation = ?1 AND sent_at < ?2 ORDER BY sent_at DESC, seq DESC LIMIT ?3",
            [.text(conversation), .integer(sentAt ?? .max), .integer(Int64(limit))],
            Self.message
        )
    }

    /// A page of older history by position: up to `limit` messages with seq below
    /// `beforeSeq` (all when nil), NEWEST FIRST. Exact: no two messages share a seq.
    public func messages(conversation: String, beforeSeq: Int64?, limit: Int) throws -> [DMMessageRow] {
        try connection.query(
            "\(Self.selectMessage) WHERE conversation = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
            [.text(conversation), .integer(beforeSeq ?? .max), .integer(Int64(limit))],
            Self.message
        )
    }

    static let selectMessage = "SELECT conversation, seq, id, sender, text, sent_at, is_read FROM dm_messages"

    static func message(_ row: SQLiteRow) -> DMMessageRow {
        DMMessageRow(conversation: row.text(0), seq: row.int64(1), id: row.text(2), sender: row.text(3),
                     text: row.text(4), sentAt: row.int64(5), isRead: row.int64(6) != 0)
    }

    /// A user's finished workouts, most recent start first.
    /// A user's finished workouts, newest first, at most `limit` (the limit is in SQL:
    /// a long logbook is never read whole for one page).
    public func logbook(user: String, limit: Int = Int(Int32.max)) throws -> [LogbookRow] {
        try connection.query(
            """
            SELECT user_id, workout_id, started_at, ended_at, origin, mode, distance, elapsed_time,
                   average_pace, average_heart_rate, max_heart_rate
            FROM logbook WHERE user_id = ?1 ORDER BY started_at DESC, workout_id LIMIT ?2
            """,
            [.text(user), .integer(Int64(limit))]
        ) { row in
            LogbookRow(userId: row.text(0), workoutId: row.text(1), startedAt: row.int64(2), endedAt: row.int64(3),
                       origin: row.text(4), mode: row.text(5), distance: row.double(6), elapsedTime: row.double(7),
                       averagePace: row.optionalDouble(8), averageHeartRate: row.optionalDouble(9),
                       maxHeartRate: row.optionalDouble(10))
        }
    }

    // MARK: Room history

    /// A page of a room's history for a member, read in one read transaction (the
    /// membership, the version, the oldest checkpoint and the rows agree).
    public func roomHistory(room: String, user: String, before: Int64?, limit: Int) throws -> RoomHistoryPage? {
        try readTransaction {
            guard try connection.queryOne(RoomHistorySchema.isMember, [.text(room), .text(user)], { _ in true }) == true,
                  let version = try connection.queryOne(RoomHistorySchema.roomVersion, [.text(room)], { $0.int64(0) }) else { return nil }
            let oldest = try connection.queryOne(RoomHistorySchema.oldestCheckpoint, [.text(room)]) { $0.optionalInt64(0) } ?? nil
            let entries = try connection.query(
                "\(RoomHistorySchema.selectRow) WHERE room_id = ?1 AND version < ?2 ORDER BY version DESC LIMIT ?3",
                [.text(room), .integer(before ?? .max), .integer(Int64(limit))], Self.historyRow)
            return RoomHistoryPage(version: version, oldestCheckpoint: oldest ?? version, entries: entries)
        }
    }

    /// The room's stickers right after `version`: its latest checkpoint at or below it and
    /// the rows after it, replayed; nil when the history no longer holds them all.
    public func roomStickers(room: String, at version: Int64) throws -> [Sticker]? {
        try readTransaction {
            guard let (from, body) = try connection.queryOne(RoomHistorySchema.checkpointAtOrBelow, [.text(room), .integer(version)], {
                ($0.int64(0), $0.blob(1))
            }) else { return nil }
            let rows = try connection.query(
                "\(RoomHistorySchema.selectRow) WHERE room_id = ?1 AND version > ?2 AND version <= ?3 ORDER BY version",
                [.text(room), .integer(from), .integer(version)], Self.historyRow)
            guard rows.count == version - from else { return nil }
            return RoomHistory.replay(try RoomHistory.stickers(inCheckpoint: body), rows: rows)
        }
    }

    static func historyRow(_ row: SQLiteRow) throws -> RoomHistoryRow {
        let frame: Frame? = row.isNull(9) ? nil : Frame(x: row.double(9), y: row.double(10), width: row.double(11), height: row.double(12))
        return RoomHistoryRow(
            roomId: row.text(0), version: row.int64(1), eventId: row.optionalText(2), userId: row.optionalText(3),
            type: try decode(row.text(4), column: "room_history.type"), stickerId: row.optionalText(5), timestamp: row.int64(6),
            loggedAt: row.int64(7), image: row.optionalText(8), frame: frame)
    }

    /// `body` inside `BEGIN` ... `COMMIT` (deferred: a reader's snapshot, no lock taken up
    /// front), so that several reads see one commit.
    private func readTransaction<T>(_ body: () throws -> T) throws -> T {
        guard !connection.isInTransaction else { return try body() }
        try connection.execute("BEGIN")
        defer { try? connection.execute("COMMIT") }
        return try body()
    }

    private static func decode<T: RawRepresentable<String>>(_ text: String, column: String) throws -> T {
        guard let value = T(rawValue: text) else {
            throw SQLiteError(code: .mismatch, message: "unexpected value \"\(text)\" for \(T.self)",
                              context: "read \(column)")
        }
        return value
    }

    // MARK: Operations

    /// `PRAGMA integrity_check`: "ok", or SQLite's list of problems, one per line.
    public func integrityCheck() throws -> String {
        try connection.query("PRAGMA integrity_check") { $0.text(0) }.joined(separator: "\n")
    }

    /// Counts of everything (full counts: cost grows with the tables; meant for operators
    /// and start-up logs, not for every batch).
    public func summary() throws -> StoreSummary {
        let kinds = Dictionary(
            try connection.query("SELECT kind, count(*) FROM entities GROUP BY kind") { ($0.text(0), Int($0.int64(1))) },
            uniquingKeysWith: +
        )
        func count(_ table: String) throws -> Int {
            Int(try connection.queryOne("SELECT count(*) FROM \(table)") { $0.int64(0) } ?? 0)
        }
        return StoreSummary(
            schemaVersion: try connection.userVersion(),
            epoch: epoch,
            createdAt: createdAt,
            rooms: kinds[EntityKind.room] ?? 0,
            conversations: kinds[EntityKind.conversation] ?? 0,
            workouts: kinds[EntityKind.workout] ?? 0,
            messages: try count("dm_messages"),
            events: try count("event_log"),
            seenIds: try count("seen_ids"),
            logbookRows: try count("logbook"),
            fileBytes: Platform.fileSize(path),
            walBytes: Platform.fileSize(path + "-wal"),
            partitions: PartitionsMismatch.reported(try recordedPartitions())
        )
    }

    /// Writes a consistent copy of the database to `path` (which must not exist yet) with
    /// `VACUUM INTO`, while the coordinator keeps running.
    ///
    /// Consistent: `VACUUM INTO` reads inside one read transaction, so the copy is the
    /// database as of one commit — never half a batch — compacted into a single file
    /// (no `-wal` beside it), ready to open or ship. The copy runs on this actor, so
    /// batches queued meanwhile wait for it (a few hundred MB/s); the live file is untouched.
    public func backup(to path: String) throws {
        if Platform.fileExists(path) {
            throw SQLiteError(code: .cantOpen, message: "the backup file already exists", context: "backup to \(path)")
        }
        try Platform.createParentDirectory(of: path)
        try connection.run("VACUUM INTO ?1", [.text(path)])
    }
}

extension SQLiteStore: CoordinatorStore {
    public nonisolated var location: String { path }

    /// A read-only WAL connection of its own (``openReader(path:)``).
    public nonisolated func queryReader() throws -> any CoordinatorStore {
        try SQLiteStore.openReader(path: path)
    }
}
