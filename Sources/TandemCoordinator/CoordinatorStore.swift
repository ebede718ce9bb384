import TandemCore
import TandemStore

/// What the coordinator's service needs of its store, and no more: recovery reads, the
/// batch commit, the queries, and the operator's check and backup. The SQLite
/// `TandemStore` is one; another backend (the failover issue's PostgreSQL store) can sit
/// behind the same protocol. The engine never sees it: it takes and returns values
/// (`StoreBatch`, `EntityRow`, ... in TandemCore).
public protocol CoordinatorStore: Actor {
    /// The id made once when the database was created (every snapshot's `epoch`).
    nonisolated var epoch: String { get }

    // Recovery
    func loadEntities(kind: String) throws -> [EntityRow]
    func loadSeenIds(since: Millis) throws -> [SeenId]
    func latestMessages(conversation: String, limit: Int) throws -> [DMMessageRow]

    // The pipeline
    func commit(_ batch: StoreBatch) throws

    // Queries (answered from ``queryReader()``, never from the pipeline's connection)
    func messages(conversation: String, before sentAt: Millis?, limit: Int) throws -> [DMMessageRow]
    func logbook(user: String, limit: Int) throws -> [LogbookRow]
    /// A store for the queries alone, beside this one: for SQLite a read-only WAL
    /// connection of its own, so a flood of history requests reads concurrently with
    /// the commits and never holds up anyone's events.
    nonisolated func queryReader() throws -> any CoordinatorStore

    // Operations
    func integrityCheck() throws -> String
    func summary() throws -> StoreSummary
    func backup(to path: String) throws
    func close()
}

extension TandemStore: CoordinatorStore {
    public nonisolated func queryReader() throws -> any CoordinatorStore {
        try TandemStore.openReader(path: path)
    }
}

/// Rebuilds an ``Engine`` from a store: the I/O of a restart, kept out of the engine,
/// which is built from the values read here (``Engine/init(configuration:recovered:now:)``).
public enum Recovery {
    public static func engine(configuration: CoordinatorConfiguration, store: some CoordinatorStore, now: Millis) async throws -> Engine {
        let roomRows = try await store.loadEntities(kind: EntityKind.room)
        // The store reads the remembered ids on its own thread while this task rebuilds
        // the rooms: the two largest parts of a restart, overlapped on two cores.
        async let seenIds = store.loadSeenIds(since: now - configuration.seenIdRetentionMs)
        var recovered = Engine.Recovered()
        recovered.rooms = try await Engine.parseRooms(roomRows)
        for row in try await store.loadEntities(kind: EntityKind.conversation) {
            let stored = try await store.latestMessages(conversation: row.key, limit: Conversation.windowSize)
            recovered.conversations.append(Engine.Recovered.StoredConversation(row: row, latestMessages: stored))
        }
        recovered.workouts = try await store.loadEntities(kind: EntityKind.workout)
        recovered.seenIds = try await seenIds
        return try Engine(configuration: configuration, epoch: store.epoch, recovered: recovered, now: now)
    }
}
