/// What is in the database, for logs, metrics and operators.
public struct StoreSummary: Sendable, Equatable {
    public var schemaVersion: Int32
    public var epoch: String
    public var createdAt: Millis
    public var rooms: Int
    public var conversations: Int
    public var workouts: Int
    public var messages: Int
    public var events: Int
    public var seenIds: Int
    public var logbookRows: Int
    /// The database's size in bytes (SQLite: the main file; PostgreSQL: the database).
    public var fileBytes: Int64
    /// SQLite: the write-ahead log not yet checkpointed into the main file, in bytes;
    /// PostgreSQL: nil (its WAL belongs to the whole server).
    public var walBytes: Int64?
    /// The partitions the database was created with (1 when none were recorded: made
    /// before partitions existed, or not yet opened by a coordinator).
    public var partitions: Int

    public init(schemaVersion: Int32, epoch: String, createdAt: Millis, rooms: Int, conversations: Int, workouts: Int,
                messages: Int, events: Int, seenIds: Int, logbookRows: Int, fileBytes: Int64, walBytes: Int64?, partitions: Int = 1) {
        self.schemaVersion = schemaVersion
        self.epoch = epoch
        self.createdAt = createdAt
        self.rooms = rooms
        self.conversations = conversations
        self.workouts = workouts
        self.messages = messages
        self.events = events
        self.seenIds = seenIds
        self.logbookRows = logbookRows
        self.fileBytes = fileBytes
        self.walBytes = walBytes
        self.partitions = partitions
    }
}
