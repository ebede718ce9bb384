/// What the coordinator needs of its store, and no more: recovery reads, the batch
/// commit, the queries, the audit trail, and the operator's check and backup.
///
/// Two stores conform: `SQLiteStore` (SQLite, the embedded default: one coordinator
/// owns the file) and `PostgresStore` (PostgreSQL: several coordinators share the
/// database, one leads at a time, and every commit is fenced by its leader term). The
/// engine never sees a store: it takes and returns values (`StoreBatch`, `EntityRow`,
/// ...). The conformance suite (Tests/TandemStoreTests/StoreConformanceTests.swift)
/// runs the same expectations against both.
public protocol CoordinatorStore: Actor {
    /// The id made once when the database was created (every snapshot's `epoch`).
    nonisolated var epoch: String { get }
    /// Where the data lives, for logs and reports: a file path, or a PostgreSQL URL
    /// without its password.
    nonisolated var location: String { get }

    // Recovery
    func loadEntities(kind: String) async throws -> [EntityRow]
    /// Every room's members, by room id, each room's in the order they joined.
    func loadRoomMembers() async throws -> [RoomMemberRow]
    /// The ids first seen at or after `since`, as digests (sealed, ready for lookups):
    /// what a restart keeps of them, read without making a string per id.
    func loadSeenDigests(since: Millis) async throws -> IdDigests
    /// The latest time an id was remembered at (its horizon: `seen_at`), nil when none is:
    /// where a restart's memory window ends if the coordinator was away for a while.
    func latestSeenAt() async throws -> Millis?
    /// Every id first seen at or after `since`, whole (tools and tests: a restart reads
    /// ``loadSeenDigests(since:)``).
    func loadSeenIds(since: Millis) async throws -> [SeenId]
    /// One remembered id and its first copy's outcome, nil when it is not remembered:
    /// confirms a digest hit (a resend of an id older than the engine keeps whole).
    func seenId(user: String, id: String) async throws -> SeenId?
    func latestMessages(conversation: String, limit: Int) async throws -> [DMMessageRow]
    /// Every conversation's row with its latest `messageLimit` messages, oldest first, in
    /// one call: a restart reads them all, and a call per conversation costs a hop to
    /// the store's executor (or a round trip to PostgreSQL) each.
    func loadConversations(messageLimit: Int) async throws -> [StoredConversation]

    // The pipeline
    /// Writes everything of one batch in one transaction: all of it or none (see
    /// `StoreBatch` for the order). Expired seen ids are deleted first (`forgetSeenIds`);
    /// seen ids already present keep their first time; entities and logbook rows are
    /// upserts; a message seq written twice fails the batch.
    func commit(_ batch: StoreBatch) async throws

    // Queries (answered from ``queryReader()``, never from the pipeline's connection)
    /// Up to `limit` messages sent strictly before `sentAt` (all when nil), newest first.
    func messages(conversation: String, before sentAt: Millis?, limit: Int) async throws -> [DMMessageRow]
    /// A user's finished workouts, newest first, at most `limit`.
    func logbook(user: String, limit: Int) async throws -> [LogbookRow]
    /// A page of a room's history for `user`: changes below `before` (all when nil),
    /// newest first, at most `limit`; nil when the room does not exist, is closed or
    /// `user` is not its member.
    func roomHistory(room: String, user: String, before: Int64?, limit: Int) async throws -> RoomHistoryPage?
    /// The room's stickers right after `version` (``RoomHistory``), nil when its history
    /// no longer reaches that version. Read where the pipeline's commits are visible.
    func roomStickers(room: String, at version: Int64) async throws -> [Sticker]?
    /// A store for the queries alone, beside this one (a connection of its own), so a
    /// flood of history requests never holds up anyone's events.
    func queryReader() async throws -> any CoordinatorStore

    // Audit and operations
    /// Event-log rows with `seq` above `after`, in commit order.
    func eventLog(after seq: Int64, limit: Int) async throws -> [EventLogRow]
    /// "ok", or the list of problems found.
    func integrityCheck() async throws -> String
    func summary() async throws -> StoreSummary
    /// A consistent copy into a new file (SQLite); PostgreSQL throws and names its own tools.
    func backup(to path: String) async throws
    func close() async
}
