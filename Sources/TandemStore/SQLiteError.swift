import CSQLite

/// A failed SQLite call: the library's own result codes and message, and what we were doing.
///
/// Every return code from SQLite goes through `SQLiteError.check`, so an error always names
/// the operation ("open /var/lib/tandem.sqlite", the SQL text) next to SQLite's explanation
/// ("file is not a database").
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A primary result code (`SQLITE_BUSY`, `SQLITE_CORRUPT`, ...). Opaque on purpose:
    /// compare against the static members, or read `rawValue` for the number.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue & 0xFF }

        public static let error = Code(rawValue: SQLITE_ERROR)
        public static let busy = Code(rawValue: SQLITE_BUSY)
        public static let locked = Code(rawValue: SQLITE_LOCKED)
        public static let readOnly = Code(rawValue: SQLITE_READONLY)
        public static let ioError = Code(rawValue: SQLITE_IOERR)
        public static let corrupt = Code(rawValue: SQLITE_CORRUPT)
        public static let full = Code(rawValue: SQLITE_FULL)
        public static let cantOpen = Code(rawValue: SQLITE_CANTOPEN)
        public static let constraint = Code(rawValue: SQLITE_CONSTRAINT)
        public static let mismatch = Code(rawValue: SQLITE_MISMATCH)
        public static let misuse = Code(rawValue: SQLITE_MISUSE)
        public static let notADatabase = Code(rawValue: SQLITE_NOTADB)

        /// SQLite's name for the code, e.g. "database disk image is malformed".
        public var description: String { String(cString: sqlite3_errstr(rawValue)) }
    }

    /// The primary result code.
    public var code: Code
    /// The extended result code (e.g. `SQLITE_CONSTRAINT_PRIMARYKEY`), as SQLite numbers it.
    public var extendedCode: Int32
    /// `sqlite3_errmsg` at the time of the failure, or our own text for errors we detect.
    public var message: String
    /// What was being done: "open <path>", the SQL, "bind ?3 in <SQL>", ...
    public var context: String

    public init(code: Code, extendedCode: Int32? = nil, message: String, context: String) {
        self.code = code
        self.extendedCode = extendedCode ?? code.rawValue
        self.message = message
        self.context = context
    }

    public var description: String {
        "SQLite error \(extendedCode) (\(code)): \(message) [while: \(context)]"
    }

    /// The one place a return code is judged. `SQLITE_OK`, `SQLITE_ROW` and `SQLITE_DONE`
    /// pass through (returned so `step` can tell them apart); anything else throws with
    /// the connection's message. `db` may be nil (a failed open without a handle).
    @discardableResult
    static func check(_ rc: Int32, db: OpaquePointer?, _ context: @autoclosure () -> String) throws(SQLiteError) -> Int32 {
        switch rc & 0xFF {
        case SQLITE_OK, SQLITE_ROW, SQLITE_DONE:
            return rc
        default:
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            let extended = db.map { sqlite3_extended_errcode($0) } ?? rc
            throw SQLiteError(code: Code(rawValue: rc), extendedCode: extended, message: message, context: context())
        }
    }
}

/// The schema of a database cannot be brought to what this code expects.
public struct MigrationError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// `PRAGMA user_version` is above every migration we know: written by newer code.
        case databaseNewerThanCode
        /// The migration list itself is wrong (versions not strictly increasing from 1).
        case invalidMigrationList
    }

    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
