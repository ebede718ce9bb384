import TandemCore

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
    /// The main database file, in bytes.
    public var fileBytes: Int64
    /// The write-ahead log not yet checkpointed into the main file, in bytes.
    public var walBytes: Int64
}
