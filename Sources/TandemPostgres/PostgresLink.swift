import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import TandemStore
import Synchronization

/// One PostgreSQL connection, made from a ``PostgresURL``, that connects again when it
/// was lost. Each Tandem actor that talks to the database owns one link: the pipeline's
/// store, the query reader, the leader lease. Not Sendable on purpose: it lives inside
/// its owner's isolation, and its methods run on the caller's executor (nonsending).
final class PostgresLink {
    let url: PostgresURL
    let role: String
    let logger: Logger
    /// Server settings for this session (`statement_timeout`, ...), sent at start-up.
    let settings: [(String, String)]
    private(set) var connection: PostgresConnection?
    private static let ids = IDGenerator()

    init(url: PostgresURL, role: String, settings: [(String, String)] = [], logger: Logger) {
        self.url = url
        self.role = role
        self.settings = settings
        self.logger = logger
    }

    /// The open connection, connecting first if there is none or it was closed.
    nonisolated(nonsending) func open() async throws -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        connection = nil
        let made = try await Self.connect(url, role: role, settings: settings, logger: logger)
        connection = made
        return made
    }

    /// Forgets a connection that failed (closing it if it is still open), so that the
    /// next ``open()`` makes a new one.
    nonisolated(nonsending) func drop() async {
        guard let connection else { return }
        self.connection = nil
        try? await connection.close()
    }

    static func connect(_ url: PostgresURL, role: String, settings: [(String, String)], logger: Logger) async throws -> PostgresConnection {
        var configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password, database: url.database,
            tls: try tls(for: url))
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [("application_name", "tandem-coordinator \(role)")] + settings
        do {
            return try await PostgresConnection.connect(configuration: configuration, id: ids.next(), logger: logger)
        } catch {
            throw PostgresStoreError(doing: "connect to \(url)", error)
        }
    }

    /// libpq's sslmode in NIOSSL terms: `disable` plain; `allow`/`prefer` TLS when the
    /// server offers it, unverified; `require` TLS, unverified (as libpq without a root
    /// certificate); `verify-ca` the chain; `verify-full` the chain and the host name.
    static func tls(for url: PostgresURL) throws -> PostgresConnection.Configuration.TLS {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch url.sslMode {
        case .disable:
            return .disable
        case .allow, .prefer, .require:
            tls.certificateVerification = .none
        case .verifyCA:
            tls.certificateVerification = .noHostnameVerification
        case .verifyFull:
            tls.certificateVerification = .fullVerification
        }
        if let root = url.sslRootCert { tls.trustRoots = .file(root) }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw PostgresStoreError(doing: "set up TLS for \(url)", error)
        }
        return url.sslMode == .allow || url.sslMode == .prefer ? .prefer(context) : .require(context)
    }

    final class IDGenerator: Sendable {
        let counter = Atomic<Int>(0)
        func next() -> Int { counter.add(1, ordering: .relaxed).newValue }
    }
}

/// A PostgreSQL failure with what Tandem was doing and what the server said. PostgresNIO
/// keeps its own errors' descriptions vague on purpose (they may hold query values);
/// this keeps the parts an operator needs: the SQLSTATE, the server's message, the
/// connection problem.
public struct PostgresStoreError: Error, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Worth another try: the connection was lost or could not be made, or the server
        /// gave up on the statement or the session (a timeout, a lock wait, a deadlock).
        case connection
        /// This process's leader term is no longer the database's: it must not write.
        case fenced
        /// The server refused the statement (a constraint, a bad value, a schema problem).
        case server(sqlState: String)
        /// The schema was written by a newer Tandem, or is not Tandem's.
        case schema
    }

    public var kind: Kind
    public var message: String

    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    init(doing what: String, _ error: any Error) {
        if let already = error as? PostgresStoreError {
            self = already
            return
        }
        if let psql = error as? PSQLError {
            if psql.code == .server, let info = psql.serverInfo {
                let state = info[.sqlState] ?? "?"
                let text = [info[.message], info[.detail].map { "(\($0))" }].compactMap { $0 }.joined(separator: " ")
                // Class 08: connection exception; 57P0x: the server is shutting down or
                // starting (a restart, a failover of the database itself); 57014: a
                // statement timeout; 25P03: the idle-in-transaction timeout ended the
                // session; 55P03: a lock wait timed out; 40001/40P01: serialization
                // failure, deadlock.
                let transient = state.hasPrefix("08") || state.hasPrefix("57P")
                    || ["57014", "25P03", "55P03", "40001", "40P01"].contains(state)
                self.init(kind: transient ? .connection : .server(sqlState: state), message: "\(what): \(text) [SQLSTATE \(state)]")
            } else {
                let cause = psql.underlying.map { ": \($0)" } ?? ""
                self.init(kind: .connection, message: "\(what): \(psql.code)\(cause)")
            }
            return
        }
        if error is CancellationError {
            self.init(kind: .connection, message: "\(what): cancelled")
            return
        }
        // NIO channel and socket errors: the connection.
        self.init(kind: .connection, message: "\(what): \(error)")
    }

    public var isConnectionLoss: Bool { kind == .connection }
    public var description: String { message }
}
