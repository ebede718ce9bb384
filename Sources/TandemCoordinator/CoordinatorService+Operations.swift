import Foundation
import Logging
import TandemCore
#if PostgreSQL
import TandemPostgres
#endif
import TandemStore

/// The operator's one-shot commands: `--check` and `--backup`.
extension CoordinatorService {
    /// What `--check` and `--backup` print: the integrity check and the summary.
    public struct CheckReport: Sendable {
        /// The database checked: a file path, or a PostgreSQL URL without its password.
        public var path: String
        /// "ok", or SQLite's list of problems.
        public var integrity: String
        public var summary: StoreSummary
        public var isSound: Bool { integrity == "ok" }

        /// For a person: one fact per line, sizes and dates readable.
        public var text: String {
            let s = summary
            let created = Date(timeIntervalSince1970: Double(s.createdAt) / 1000).formatted(.iso8601)
            return """
                integrity: \(integrity)
                database: \(path) (schema v\(s.schemaVersion), epoch \(s.epoch), created \(created))
                size: \(Self.bytes(s.fileBytes))\(s.walBytes.map { " (+ \(Self.bytes($0)) write-ahead log not yet checkpointed)" } ?? "")
                partitions: \(s.partitions)
                rooms: \(s.rooms), conversations: \(s.conversations), workouts: \(s.workouts)
                DM messages: \(s.messages), events logged: \(s.events), remembered ids: \(s.seenIds), logbook entries: \(s.logbookRows)
                """
        }

        /// For scripts (`--check --json`): one JSON object.
        public var json: String {
            let s = summary
            let bytes = JSON.obj([
                "path": .string(path), "integrity": .string(integrity), "sound": .bool(isSound),
                "schemaVersion": .int(Int64(s.schemaVersion)), "epoch": .string(s.epoch), "createdAt": .int(s.createdAt),
                "fileBytes": .int(s.fileBytes), "walBytes": s.walBytes.map(JSON.int) ?? .null,
                "rooms": .int(Int64(s.rooms)), "conversations": .int(Int64(s.conversations)), "workouts": .int(Int64(s.workouts)),
                "messages": .int(Int64(s.messages)), "events": .int(Int64(s.events)), "seenIds": .int(Int64(s.seenIds)),
                "logbookRows": .int(Int64(s.logbookRows)), "partitions": .int(Int64(s.partitions)),
            ]).serialized()
            return String(decoding: bytes, as: UTF8.self)
        }

        static func bytes(_ n: Int64) -> String {
            if n < 1024 { return "\(n) B" }
            let units = ["KiB", "MiB", "GiB", "TiB"]
            var value = Double(n) / 1024
            var unit = 0
            while value >= 1024, unit < units.count - 1 {
                value /= 1024
                unit += 1
            }
            return String(format: "%.1f %@", value, units[unit])
        }
    }

    /// `--check`: the database's integrity and what it holds (a SQLite file, or a
    /// PostgreSQL database read over a connection of its own).
    public static func checkDatabase(at location: String, logger: Logger = Logger(label: "tandem.check")) async throws -> CheckReport {
        let store = try await openForOperations(location, logger: logger)
        do {
            let integrity = try await store.integrityCheck()
            let summary = try await store.summary()
            await store.close()
            return CheckReport(path: store.location, integrity: integrity, summary: summary)
        } catch {
            await store.close()
            throw error
        }
    }

    /// A store for `--check` and `--backup`: an existing SQLite file (never created
    /// here), or PostgreSQL read-only.
    static func openForOperations(_ location: String, logger: Logger) async throws -> any CoordinatorStore {
        switch try StoreLocation(location) {
        case .sqlite(let path):
            guard FileManager.default.fileExists(atPath: path) else {
                throw CoordinatorError("no database at \(path)")
            }
            return try SQLiteStore.open(path: path)
        case .postgres(let url):
            #if PostgreSQL
            return try await PostgresStore.openReader(url: url, logger: logger)
            #else
            _ = url
            throw CoordinatorError(StoreLocation.noPostgresInThisBuild)
            #endif
        }
    }

    /// `--backup`: a consistent copy of the database at `path` written to `destination`
    /// (which must not exist) with `VACUUM INTO` over a connection of its own. SQLite's WAL
    /// lets this reader run beside a coordinator that keeps committing: the copy is the
    /// database as of one commit. Returns the check of the copy.
    public static func backupDatabase(at location: String, to destination: String) async throws -> CheckReport {
        if case .postgres = try StoreLocation(location) {
            throw CoordinatorError("--backup copies a SQLite file; back a PostgreSQL database up with its own tools (pg_dump, or base backups with WAL archiving: docs/OPERATIONS.md)")
        }
        guard FileManager.default.fileExists(atPath: location) else {
            throw CoordinatorError("no database at \(location)")
        }
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw CoordinatorError("\(destination) already exists: a backup never overwrites a file; name a new one")
        }
        let store = try SQLiteStore.open(path: location)
        do {
            try await store.backup(to: destination)
            await store.close()
        } catch {
            await store.close()
            throw error
        }
        return try await checkDatabase(at: destination)
    }
}
