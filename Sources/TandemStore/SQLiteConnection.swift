import CSQLite
import CSQLiteWAL

/// One open SQLite database: the raw `sqlite3*`, a cache of prepared statements, and the
/// pragmas Tandem runs with.
///
/// Not Sendable, on purpose: a connection is confined to one owner (the `SQLiteStore`
/// actor), which is also why it is opened with `SQLITE_OPEN_NOMUTEX` — SQLite's own
/// per-call mutex would only guard against a second thread that cannot exist.
///
/// Durability (`synchronous`): the database runs in WAL mode, where a commit appends to the
/// `-wal` file and `synchronous=NORMAL` skips the fsync on each commit (the WAL is synced
/// at checkpoints instead). A committed transaction is in the OS page cache the moment
/// `COMMIT` returns, so it survives the process dying in any way — a crash, SIGKILL,
/// an OOM kill — which is the failure the coordinator must survive. What NORMAL gives up
/// is the last transactions before a power loss or kernel panic: those may roll back, but
/// the file is never corrupted. `.full` fsyncs the WAL on every commit and closes that gap,
/// at the cost of one fsync per coordinator batch; choose it where the host can lose power
/// and the broker's own persistence survives it (otherwise the broker has lost the same
/// messages anyway).
public final class SQLiteConnection {
    public enum Synchronous: String, Sendable {
        case normal = "NORMAL"
        case full = "FULL"
    }

    public struct Options: Sendable {
        /// How long a statement waits for another connection's lock before SQLITE_BUSY.
        public var busyTimeoutMilliseconds: Int32 = 5_000
        public var synchronous: Synchronous = .normal
        /// Open read-only (backups, inspection). Read-only connections skip the WAL pragma.
        public var readOnly = false
        /// Whether a commit may checkpoint the WAL itself (SQLite's default, every 1000
        /// pages). Off, the writer never pays for a checkpoint: another connection runs
        /// them (`SQLiteStore.checkpoint()`).
        public var autoCheckpoint = true
        /// `PRAGMA journal_size_limit`: when a commit starts the WAL over, the file is cut
        /// back to this many bytes (nil: SQLite's default, never cut back). A WAL that
        /// once grew large otherwise keeps its size on disk for as long as the database
        /// is open, however little of it is in use.
        public var journalSizeLimitBytes: Int64?
        /// Whether a commit's WAL frames are written together (the "tandem-wal" VFS,
        /// CSQLiteWAL: one call for up to 128 KiB) instead of two calls a page. Nothing
        /// else differs: the frames are in the file before the commit returns, as with
        /// SQLite's own VFS.
        public var gathersWALWrites = true
        public init() {}
    }

    /// Where the database lives, as given to `open`.
    public let path: String
    private var db: OpaquePointer?
    private var statements: [StatementKey: CachedStatement] = [:]

    /// A prepared statement in the cache, and whether it is borrowed now.
    private final class CachedStatement {
        let handle: OpaquePointer
        var borrowed = true

        init(_ handle: OpaquePointer) { self.handle = handle }
    }

    /// A statement's SQL as the cache's key, hashed by its length and its last 32 bytes
    /// (where the coordinator's statements differ): a `String`'s own hash reads all of it,
    /// a few hundred bytes a statement. With a statement taken out of the dictionary and
    /// put back for each use, the cache was some 4 % of the coordinator's CPU at 2,000
    /// events/s. Equal only when the SQL is.
    struct StatementKey: Hashable {
        let sql: String

        static func == (a: StatementKey, b: StatementKey) -> Bool { a.sql == b.sql }

        func hash(into hasher: inout Hasher) {
            let utf8 = sql.utf8
            hasher.combine(utf8.count)
            let hashed = utf8.withContiguousStorageIfAvailable { bytes -> Bool in
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.suffix(32))))
                return true
            }
            if hashed == nil { hasher.combine(sql) }
        }
    }
    /// The text and blob bytes bound by ``run(_:_:)``, ``query(_:_:_:)`` and
    /// ``queryOne(_:_:_:)``, one buffer per statement borrowed at once (a query's row
    /// callback may run another): SQLite reads them in place (SQLITE_STATIC) until the
    /// statement is reset, instead of copying each into an allocation of its own and
    /// freeing it at the reset (some 15 of each a room event on the coordinator's commit).
    private var bindBuffers: [UnsafeMutableRawBufferPointer] = []
    /// How many statements are borrowed at this moment (``withStatement(_:_:)``).
    private var borrowed = 0

    /// SQLite's memory statistics off, once per process and before the first open:
    /// every allocation SQLite makes otherwise takes a global mutex to count it. Tandem
    /// never reads the statistics.
    private static let configured: Void = { _ = tandem_sqlite_disable_memstatus() }()

    /// The "tandem-wal" VFS, registered once; nil (SQLite's default VFS) if it could not be.
    private static let gatheringVFS: String? = tandem_wal_vfs_register() == SQLITE_OK ? TANDEM_WAL_VFS_NAME : nil

    /// Opens (creating if missing) the database at `path` and applies Tandem's pragmas.
    /// A file that is not a database, or is corrupt, fails here with an `SQLiteError`.
    public init(path: String, options: Options = Options()) throws {
        self.path = path
        _ = Self.configured
        var handle: OpaquePointer?
        let flags = (options.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &handle, flags, options.gathersWALWrites ? Self.gatheringVFS : nil)
        do {
            try SQLiteError.check(rc, db: handle, "open \(path)")
        } catch {
            // sqlite3_open_v2 hands back a handle even on failure; it must still be closed.
            sqlite3_close_v2(handle)
            throw error
        }
        db = handle
        do {
            try SQLiteError.check(sqlite3_busy_timeout(handle, options.busyTimeoutMilliseconds), db: handle,
                                  "busy_timeout on \(path)")
            // The first statement reads the header: a garbage file fails here with SQLITE_NOTADB.
            if !options.readOnly {
                let mode = try queryOne("PRAGMA journal_mode=WAL") { $0.text(0) }
                if mode?.lowercased() != "wal" && path != ":memory:" && !path.isEmpty {
                    throw SQLiteError(code: .error, message: "journal_mode is \(mode ?? "unknown"), not wal",
                                      context: "PRAGMA journal_mode=WAL")
                }
            }
            try execute("PRAGMA synchronous=\(options.synchronous.rawValue)")
            if !options.autoCheckpoint { try execute("PRAGMA wal_autocheckpoint=0") }
            if let limit = options.journalSizeLimitBytes { try execute("PRAGMA journal_size_limit=\(limit)") }
            try execute("PRAGMA foreign_keys=ON")
            // Statement journals and other temporary data in memory, not in files that a
            // batch would create, write and unlink.
            try execute("PRAGMA temp_store=MEMORY")
        } catch var error as SQLiteError {
            close()
            // Name the file: "PRAGMA journal_mode=WAL" alone does not say which database is bad.
            error.context = "open \(path): \(error.context)"
            throw error
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// The writes to this connection's WAL file since it was opened, those SQLite asked for
    /// and those made to the file (``Options/gathersWALWrites``); nil when they are not
    /// gathered or the WAL is not open yet.
    var walWrites: (asked: UInt64, made: UInt64)? {
        var asked: UInt64 = 0, made: UInt64 = 0
        guard let db, tandem_wal_writes(db, &asked, &made) == 1 else { return nil }
        return (asked, made)
    }

    /// Sets how long a statement waits for another connection's lock before SQLITE_BUSY.
    public func setBusyTimeout(_ milliseconds: Int32) throws(SQLiteError) {
        let db = try handle("busy_timeout")
        try SQLiteError.check(sqlite3_busy_timeout(db, milliseconds), db: db, "busy_timeout on \(path)")
    }

    /// Finalizes every cached statement and closes the database. Idempotent; afterwards
    /// every call throws `SQLITE_MISUSE`.
    public func close() {
        for buffer in bindBuffers { buffer.deallocate() }
        bindBuffers.removeAll()
        // One borrowed now is finalized by its borrower (``withStatement(_:_:)``).
        for cached in statements.values where !cached.borrowed { sqlite3_finalize(cached.handle) }
        statements.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    public var isOpen: Bool { db != nil }

    private func handle(_ context: @autoclosure () -> String) throws(SQLiteError) -> OpaquePointer {
        guard let db else {
            throw SQLiteError(code: .misuse, message: "the connection is closed", context: context())
        }
        return db
    }

    // MARK: Statements

    /// Runs one or more statements without bindings or results (DDL, pragmas).
    public func execute(_ sql: String) throws(SQLiteError) {
        let db = try handle(sql)
        try SQLiteError.check(sqlite3_exec(db, sql, nil, nil, nil), db: db, sql)
    }

    /// Borrows the cached prepared statement for `sql` (preparing it on first use), and
    /// resets it and clears its bindings when `body` returns or throws.
    ///
    /// The cached statement is marked borrowed meanwhile, so a `body` that runs the same
    /// SQL again (a query inside a query's row callback) gets a statement of its own,
    /// finalized after it, instead of resetting the one it is iterating. One lookup a
    /// call: the cache is not changed to borrow.
    public func withStatement<T>(_ sql: String, _ body: (SQLiteStatement) throws -> T) throws -> T {
        let db = try handle(sql)
        let key = StatementKey(sql: sql)
        let cached: CachedStatement?
        let statement: OpaquePointer
        if let found = statements[key] {
            if found.borrowed {
                cached = nil
                statement = try prepare(sql, db: db)
            } else {
                found.borrowed = true
                cached = found
                statement = found.handle
            }
        } else {
            statement = try prepare(sql, db: db)
            let fresh = CachedStatement(statement)
            statements[key] = fresh
            cached = fresh
        }
        borrowed += 1
        defer {
            borrowed -= 1
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
            cached?.borrowed = false
            // A copy of a borrowed one, or the database closed meanwhile (which left
            // this borrowed statement to us).
            if cached == nil || self.db == nil { sqlite3_finalize(statement) }
        }
        return try body(SQLiteStatement(handle: statement, db: db, sql: sql))
    }

    private func prepare(_ sql: String, db: OpaquePointer) throws(SQLiteError) -> OpaquePointer {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        try SQLiteError.check(rc, db: db, sql)
        guard let statement else {
            // Only whitespace or a comment: nothing to run.
            throw SQLiteError(code: .misuse, message: "no statement in SQL", context: sql)
        }
        return statement
    }

    /// Runs a statement to completion; returns the number of rows it changed.
    @discardableResult
    public func run(_ sql: String, _ bindings: [SQLiteValue] = []) throws -> Int {
        try withStatement(sql) { statement in
            try bindInPlace(bindings, to: statement)
            while try statement.step() {}
            return Int(sqlite3_changes64(statement.db))
        }
    }

    /// Runs a query and maps every row; `map` sees each row only while it is current.
    public func query<T>(_ sql: String, _ bindings: [SQLiteValue] = [],
                         _ map: (SQLiteRow) throws -> T) throws -> [T] {
        try withStatement(sql) { statement in
            try bindInPlace(bindings, to: statement)
            var rows: [T] = []
            while try statement.step() { rows.append(try map(statement.row)) }
            return rows
        }
    }

    /// The first row of a query, mapped, or nil when there is none.
    public func queryOne<T>(_ sql: String, _ bindings: [SQLiteValue] = [],
                            _ map: (SQLiteRow) throws -> T) throws -> T? {
        try withStatement(sql) { statement in
            try bindInPlace(bindings, to: statement)
            return try statement.step() ? try map(statement.row) : nil
        }
    }

    /// Binds `values` to the statement just borrowed, its text and blobs copied into this
    /// depth's buffer and bound in place: valid until the statement is reset, which
    /// ``withStatement(_:_:)`` does before the buffer can be used again.
    private func bindInPlace(_ values: [SQLiteValue], to statement: SQLiteStatement) throws(SQLiteError) {
        var bytes = 0
        for value in values {
            switch value {
            case .text(let text): bytes += text.utf8.count
            case .blob(let blob): bytes += blob.count
            case .integer, .real, .null: break
            }
        }
        guard bytes > 0 else { return try statement.bind(values) }
        let depth = borrowed - 1
        while bindBuffers.count <= depth { bindBuffers.append(UnsafeMutableRawBufferPointer(start: nil, count: 0)) }
        if bindBuffers[depth].count < bytes {
            bindBuffers[depth].deallocate()
            bindBuffers[depth] = .allocate(byteCount: max(bytes, 2 * bindBuffers[depth].count, 4_096), alignment: 8)
        }
        let buffer = bindBuffers[depth]
        var offset = 0
        for (index, value) in values.enumerated() {
            let at = Int32(index + 1)
            switch value {
            case .text(var text) where !text.isEmpty:
                let count = text.withUTF8 { utf8 in
                    buffer.baseAddress!.advanced(by: offset).copyMemory(from: utf8.baseAddress!, byteCount: utf8.count)
                    return utf8.count
                }
                let start = buffer.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self)
                try SQLiteError.check(sqlite3_bind_text(statement.handle, at, start, Int32(count), tandem_sqlite_static()),
                                      db: statement.db, "bind ?\(at) in \(statement.sql)")
                offset += count
            case .blob(let blob) where !blob.isEmpty:
                blob.withUnsafeBytes { buffer.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                try SQLiteError.check(
                    sqlite3_bind_blob(statement.handle, at, buffer.baseAddress!.advanced(by: offset), Int32(blob.count), tandem_sqlite_static()),
                    db: statement.db, "bind ?\(at) in \(statement.sql)")
                offset += blob.count
            default:
                try statement.bind(value, at: at)
            }
        }
    }

    /// The rowid of the last successful INSERT on this connection.
    public var lastInsertRowID: Int64 {
        db.map { sqlite3_last_insert_rowid($0) } ?? 0
    }

    /// True while a transaction is open.
    public var isInTransaction: Bool {
        db.map { sqlite3_get_autocommit($0) == 0 } ?? false
    }
}
