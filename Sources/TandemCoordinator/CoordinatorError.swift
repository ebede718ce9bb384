/// What stops one of the coordinator's own operations, said in a line for the operator:
/// `--check` or `--backup` on a database that cannot have it, the metrics port that
/// cannot be bound, a PostgreSQL URL in a build without PostgreSQL. (What the libraries
/// below throw keeps their own types: `SQLiteError`, `PostgresStoreError`, `MQTTError`,
/// `BrokerAccessError`.)
public struct CoordinatorError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
