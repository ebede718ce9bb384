#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// A real PostgreSQL server for tests: `initdb` into a temporary folder, `postgres` on a
/// free loopback port, stopped by its PID at the end (``withPostgres(_:)``), as the
/// tests' brokers are.
///
/// Debian's `postgresql` package provides the binaries under
/// /usr/lib/postgresql/<version>/bin (`TANDEM_PG_BIN` names another folder). PostgreSQL
/// refuses to run as root: as root the server runs as the `postgres` user the package
/// creates, through `setpriv`, which execs it (so the PID we hold is the postmaster's).
/// The cluster trusts local connections (user `tandem`, no password) and skips fsync:
/// a test server, never a model for production settings.
public final class PostgresServer: Sendable {
    public let host = "127.0.0.1"
    public let port: Int
    public let directory: String
    public let dataDirectory: String
    public let logPath: String
    public let binaries: String
    public static let user = "tandem"
    private let process: Mutex<ChildProcess?>
    /// In a ``NetLab``: the host it runs in and the address other hosts dial (port 5432);
    /// ``host`` and ``port`` are then a portal from inside that host, for the test.
    public let lab: (lab: NetLab, host: String, address: String)?
    public static let labPort = 5432

    /// A URL for `database` on this server, as `--database` takes it.
    public func url(database: String = "tandem") -> String {
        "postgres://\(Self.user)@\(host):\(port)/\(database)?sslmode=disable"
    }

    /// What a coordinator inside the lab gives as `--database`.
    public func labURL(database: String = "tandem") -> String {
        guard let lab else { return url(database: database) }
        return "postgres://\(Self.user)@\(lab.address):\(Self.labPort)/\(database)?sslmode=disable"
    }

    /// A new cluster inside `host` of `lab`, with a database named `tandem`.
    public static func start(in lab: NetLab, host: String) async throws -> PostgresServer {
        guard let binaries = findBinaries() else { throw PostgresServerError.missing }
        let directory = runsAsRoot ? try makeDirectory(in: "/tmp") : try makeTemporaryDirectory(prefix: "postgres-")
        let address = lab[host].address
        let port = try await lab.portal(into: host, to: address, port: labPort)
        let server = PostgresServer(port: port, directory: directory, binaries: binaries, lab: (lab, host, address))
        try await server.initialize()
        try await server.launch()
        try await server.createDatabase("tandem")
        return server
    }

    /// Starts a new cluster with a database named `tandem`.
    public static func start() async throws -> PostgresServer {
        guard let binaries = findBinaries() else { throw PostgresServerError.missing }
        var attempt = 1
        while true {
            // As root, under /tmp itself: the postgres user must be able to reach the
            // folder, and TMPDIR may be a private one.
            let directory = runsAsRoot ? try makeDirectory(in: "/tmp") : try makeTemporaryDirectory(prefix: "postgres-")
            let server = PostgresServer(port: try freeTCPPort(), directory: directory, binaries: binaries)
            try await server.initialize()
            do {
                try await server.launch()
                try await server.createDatabase("tandem")
                return server
            } catch PostgresServerError.exited(let log) where attempt < 3 && log.contains("already in use") {
                attempt += 1
            }
        }
    }

    private init(port: Int, directory: String, binaries: String, lab: (lab: NetLab, host: String, address: String)? = nil) {
        self.lab = lab
        self.port = port
        self.directory = directory
        self.dataDirectory = directory + "/data"
        self.logPath = directory + "/postgres.log"
        self.binaries = binaries
        self.process = Mutex(nil)
    }

    deinit {
        process.withLock { $0 = nil }  // SIGKILL if still running
        if ProcessInfo.processInfo.environment["TANDEM_KEEP_POSTGRES_FILES"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    public var pid: pid_t? { process.withLock { $0?.isRunning == true ? $0?.pid : nil } }
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Creates a database (empty: the coordinator makes its schema).
    public func createDatabase(_ name: String) async throws {
        let result = try await run("createdb", ["-h", host, "-p", String(port), "-U", Self.user, name])
        guard result.exitCode == 0 else { throw PostgresServerError.command("createdb \(name)", result.standardError) }
    }

    /// Runs SQL through psql and returns what it printed (unaligned, tuples only).
    public func psql(_ sql: String, database: String = "tandem") async throws -> String {
        let result = try await run("psql", ["-h", host, "-p", String(port), "-U", Self.user, "-d", database, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        guard result.exitCode == 0 else { throw PostgresServerError.command("psql -c \(sql)", result.standardError) }
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Fast shutdown (SIGINT: open transactions are rolled back, clients disconnected),
    /// waiting for the postmaster to exit; SIGKILL if it takes longer than `timeout`.
    public func stop(timeout: Duration = .seconds(15)) async {
        guard let child = process.withLock({ $0 }) else { return }
        child.signal(SIGINT)
        if await child.waitForTermination(timeout: timeout) == nil {
            child.signal(SIGKILL)
            _ = await child.waitForTermination(timeout: .seconds(10))
        }
        process.withLock { $0 = nil }
    }

    /// Stops the server (fast shutdown) and starts it again on the same port and data.
    public func restart() async throws {
        await stop()
        try await launch()
    }

    // MARK: - Internals

    private static var runsAsRoot: Bool { getuid() == 0 }

    private static func makeDirectory(in base: String) throws -> String {
        var template = Array("\(base)/tandem-postgres-XXXXXX".utf8CString)
        guard let result = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw PostgresServerError.command("mkdtemp in \(base)", String(cString: strerror(errno)))
        }
        return String(cString: result)
    }

    /// As root: the command as the `postgres` user (setpriv execs it in place).
    private func command(_ tool: String, _ arguments: [String]) -> (String, [String]) {
        let path = binaries + "/" + tool
        guard Self.runsAsRoot else { return (path, arguments) }
        return ("/usr/bin/setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", path] + arguments)
    }

    private func run(_ tool: String, _ arguments: [String]) async throws -> ChildProcess.Completed {
        let (executable, args) = command(tool, arguments)
        return try await ChildProcess.run(executable, args, timeout: .seconds(60))
    }

    private func initialize() async throws {
        if Self.runsAsRoot {
            // The postgres user must own the folder it writes into.
            let chown = try await ChildProcess.run("/bin/chown", ["-R", "postgres:postgres", directory])
            guard chown.exitCode == 0 else {
                throw PostgresServerError.command("chown postgres \(directory) (is Debian's postgresql package installed?)", chown.standardError)
            }
        }
        let result = try await run("initdb", [
            "-D", dataDirectory, "-U", Self.user, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync",
        ])
        guard result.exitCode == 0 else { throw PostgresServerError.command("initdb", result.standardOutput + result.standardError) }
        if lab != nil {
            // The lab's hosts (and the portal, which connects from inside this one).
            let hba = dataDirectory + "/pg_hba.conf"
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: hba))
            handle.seekToEndOfFile()
            handle.write(Data("host all all 10.77.0.0/24 trust\n".utf8))
            try handle.close()
        }
    }

    private func launch() async throws {
        var (executable, args) = command("postgres", [
            "-D", dataDirectory, "-p", String(lab == nil ? port : Self.labPort), "-k", directory,
            "-c", "listen_addresses=\(lab?.address ?? host)", "-c", "fsync=off", "-c", "full_page_writes=off",
            "-c", "max_connections=100", "-c", "log_min_messages=warning",
        ])
        if let lab { (executable, args) = lab.lab.command(lab.host, [executable] + args) }
        let child = try ChildProcess(executable, args, standardOutput: logPath, standardError: logPath)
        let startedAt = ContinuousClock.now
        while true {
            if let termination = child.termination {
                throw PostgresServerError.exited("postgres \(termination): \(log)")
            }
            let ready = try await ChildProcess.run(binaries + "/pg_isready", ["-h", host, "-p", String(port), "-q"])
            if ready.exitCode == 0 { break }
            if ContinuousClock.now - startedAt > .seconds(30) {
                child.signal(SIGKILL)
                _ = await child.waitForTermination(timeout: .seconds(5))
                throw PostgresServerError.exited("postgres did not accept connections on \(port) within 30 s: \(log)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.withLock { $0 = child }
    }

    /// `TANDEM_PG_BIN`, else the newest /usr/lib/postgresql/<version>/bin, else the folder
    /// of an `initdb` on the PATH.
    static func findBinaries() -> String? {
        let fm = FileManager.default
        if let named = ProcessInfo.processInfo.environment["TANDEM_PG_BIN"], fm.isExecutableFile(atPath: named + "/postgres") {
            return named
        }
        let root = "/usr/lib/postgresql"
        let versions = ((try? fm.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() where fm.isExecutableFile(atPath: "\(root)/\(version)/bin/postgres") {
            return "\(root)/\(version)/bin"
        }
        if let initdb = ChildProcess.findExecutable("initdb") {
            let folder = URL(fileURLWithPath: initdb).resolvingSymlinksInPath().deletingLastPathComponent().path
            if fm.isExecutableFile(atPath: folder + "/postgres") { return folder }
        }
        return nil
    }
}

public enum PostgresServerError: Error, CustomStringConvertible {
    case missing
    case command(String, String)
    case exited(String)

    public var description: String {
        switch self {
        case .missing:
            "PostgreSQL is not installed: apt-get install postgresql (the tests need a real server; they do not skip without one)"
        case .command(let what, let output):
            "\(what) failed: \(output)"
        case .exited(let log):
            "PostgreSQL did not start: \(log)"
        }
    }
}

/// Starts a PostgreSQL server, runs `body` with it, and stops it however `body` ends.
public func withPostgres<T>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: (PostgresServer) async throws -> T
) async throws -> T {
    let server = try await PostgresServer.start()
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}
