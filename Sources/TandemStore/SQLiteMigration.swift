import CSQLite

/// One step of a schema's history. Versions start at 1 and grow by one; a migration is
/// never edited once shipped — a change is a new migration.
public struct Migration: Sendable {
    public let version: Int32
    public let name: String
    public let apply: @Sendable (SQLiteConnection) throws -> Void

    public init(version: Int32, name: String, apply: @escaping @Sendable (SQLiteConnection) throws -> Void) {
        self.version = version
        self.name = name
        self.apply = apply
    }

    public init(version: Int32, name: String, sql: String) {
        self.init(version: version, name: name) { try $0.execute(sql) }
    }
}

extension SQLiteConnection {
    /// The schema version, kept in the database header (`PRAGMA user_version`).
    public func userVersion() throws -> Int32 {
        try queryOne("PRAGMA user_version") { Int32(truncatingIfNeeded: $0.int64(0)) } ?? 0
    }

    /// Applies every migration above the database's version, in order, each in its own
    /// transaction together with the new `user_version`: a crash between two migrations
    /// leaves a database at a known version, never half of one.
    ///
    /// Throws `MigrationError.databaseNewerThanCode` when the database has a version above
    /// the last migration (newer code wrote it; running on would misread it).
    /// Returns the versions before and after.
    @discardableResult
    public func migrate(_ migrations: [Migration]) throws -> (from: Int32, to: Int32) {
        for (index, migration) in migrations.enumerated() where migration.version != Int32(index + 1) {
            throw MigrationError(
                code: .invalidMigrationList,
                message: "migration \"\(migration.name)\" has version \(migration.version), expected \(index + 1): versions must run 1, 2, 3, ..."
            )
        }
        let known = migrations.last?.version ?? 0
        let current = try userVersion()
        if current > known {
            throw MigrationError(
                code: .databaseNewerThanCode,
                message: "\(path) has schema version \(current), but this build knows versions up to \(known): it was written by a newer Tandem; upgrade Tandem or restore a backup"
            )
        }
        for migration in migrations where migration.version > current {
            try transaction { connection in
                try migration.apply(connection)
                try connection.execute("PRAGMA user_version = \(migration.version)")
            }
        }
        return (current, max(current, known))
    }
}
