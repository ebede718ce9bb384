import Foundation
import TandemStore

/// Where `--database` points: a SQLite file (the embedded default: one coordinator owns
/// it) or a PostgreSQL database (any number of coordinators, one leader at a time).
public enum StoreLocation: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(PostgresURL)

    /// A `postgres://` or `postgresql://` URL is PostgreSQL (its password, when the URL
    /// has none, found as libpq finds it: `PGPASSWORD`, `PGPASSFILE`, `~/.pgpass`);
    /// anything else is a file path.
    public init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(PostgresURL.Invalid) {
        if PostgresURL.isPostgres(text) {
            let user = environment["PGUSER"] ?? environment["USER"] ?? "postgres"
            self = .postgres(try PostgresURL(parsing: text, defaultUser: user).resolvingPassword(environment: environment))
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

    /// Whether this build has PostgreSQL (the package's default `PostgreSQL` trait).
    public static var postgresBuiltIn: Bool {
        #if PostgreSQL
        true
        #else
        false
        #endif
    }

    public static let noPostgresInThisBuild = "this tandem-coordinator was built without PostgreSQL (scripts/run leaves it out for a SQLite file); build it with `swift build -c release --product tandem-coordinator`, whose default traits include it"

    /// A `postgres://` database given to a build without PostgreSQL.
}
