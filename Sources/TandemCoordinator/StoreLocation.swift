import TandemPostgres

/// Where `--database` points: a SQLite file (the embedded default: one coordinator owns
/// it) or a PostgreSQL database (any number of coordinators, one leader at a time).
public enum StoreLocation: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(PostgresURL)

    /// A `postgres://` or `postgresql://` URL is PostgreSQL; anything else is a file path.
    public init(_ text: String, defaultUser: String = "postgres") throws(PostgresURL.Invalid) {
        if PostgresURL.isPostgres(text) {
            self = .postgres(try PostgresURL(parsing: text, defaultUser: defaultUser))
        } else {
            self = .sqlite(path: text)
        }
    }

    /// For logs: the path, or the URL without its password.
    public var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let url): url.description
        }
    }
}
