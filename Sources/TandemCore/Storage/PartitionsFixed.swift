/// A database's number of partitions is fixed when it is created (CONTRACT "Partitions"):
/// a coordinator started on it with another `--partitions` is refused before it touches
/// the database or the broker.
public struct PartitionsMismatch: Error, CustomStringConvertible, Sendable {
    public var database: String
    public var stored: Int
    public var configured: Int

    public init(database: String, stored: Int, configured: Int) {
        self.database = database
        self.stored = stored
        self.configured = configured
    }

    public var description: String {
        "\(database) was created with \(stored) partition\(stored == 1 ? "" : "s"), and --partitions \(configured) differs: "
            + "the number of partitions is fixed for the life of a database (start with --partitions \(stored), or on a new database)"
    }

    /// The SQL both stores read the record with (the same text runs on SQLite and
    /// PostgreSQL): the recorded value, and whether the database holds any data yet.
    public static let recordedSQL = "SELECT value FROM meta WHERE key = 'partitions'"
    public static let holdsDataSQL =
        "SELECT EXISTS(SELECT 1 FROM entities) OR EXISTS(SELECT 1 FROM event_log) OR EXISTS(SELECT 1 FROM seen_ids)"

    /// The number a report shows for a recorded value: 1 when none is recorded.
    public static func reported(_ recorded: String?) -> Int {
        recorded.map { Int($0) ?? 0 } ?? 1
    }

    /// What a database records: nil (nothing recorded yet) is 1 for a database that
    /// holds data (it was made before partitions existed), and for a new one `configured`,
    /// to be recorded.
    public static func settle(recorded: String?, holdsData: Bool, configured: Int, database: String) throws(PartitionsMismatch) -> (partitions: Int, record: Bool) {
        let stored: Int
        if recorded != nil || holdsData {
            stored = reported(recorded)
        } else {
            return (configured, true)
        }
        guard stored == configured else { throw PartitionsMismatch(database: database, stored: stored, configured: configured) }
        return (stored, false)
    }
}
