import CSQLite

/// A prepared statement borrowed from the connection's cache for the length of one call.
///
/// Only valid inside the closure that received it: the connection resets it and clears
/// its bindings afterwards, so it must not escape (it is not Sendable and holds a raw pointer).
public struct SQLiteStatement {
    let handle: OpaquePointer
    let db: OpaquePointer
    let sql: String

    /// Binds `values` to `?1...?n`. Fewer values than parameters leaves the rest NULL.
    public func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    /// Binds one parameter, 1-based. Text and blobs are copied (SQLITE_TRANSIENT).
    public func bind(_ value: SQLiteValue, at index: Int32) throws(SQLiteError) {
        let rc: Int32
        switch value {
        case .integer(let v):
            rc = sqlite3_bind_int64(handle, index, v)
        case .real(let v):
            rc = sqlite3_bind_double(handle, index, v)
        case .text(let v):
            // An empty buffer may have a nil base address, which SQLite would bind as NULL.
            if v.isEmpty {
                rc = sqlite3_bind_text(handle, index, "", 0, tandem_sqlite_transient())
            } else {
                var text = v
                rc = text.withUTF8 { utf8 in
                    utf8.withMemoryRebound(to: CChar.self) {
                        sqlite3_bind_text(handle, index, $0.baseAddress, Int32($0.count), tandem_sqlite_transient())
                    }
                }
            }
        case .blob(let v):
            rc = v.isEmpty
                ? sqlite3_bind_zeroblob(handle, index, 0)
                : v.withUnsafeBytes { sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), tandem_sqlite_transient()) }
        case .null:
            rc = sqlite3_bind_null(handle, index)
        }
        try SQLiteError.check(rc, db: db, "bind ?\(index) in \(sql)")
    }

    /// One step: true while there is a row to read, false when done.
    public func step() throws(SQLiteError) -> Bool {
        try SQLiteError.check(sqlite3_step(handle), db: db, sql) & 0xFF == SQLITE_ROW
    }

    /// The current row; valid until the next `step`.
    public var row: SQLiteRow { SQLiteRow(handle: handle) }
}

/// The current row of a statement, read by 0-based column index.
/// Valid only until the statement steps again or is reset: copy out what you need.
public struct SQLiteRow {
    let handle: OpaquePointer

    public var columnCount: Int32 { sqlite3_column_count(handle) }

    public func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    public func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    public func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    /// The column as UTF-8 text; "" for NULL.
    public func text(_ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// The column's UTF-8 text in place, without a copy: valid only until the statement
    /// steps again or is reset (hash it or copy it, never keep it). Empty for NULL.
    public func textBytes(_ column: Int32) -> UnsafeRawBufferPointer {
        guard let bytes = sqlite3_column_text(handle, column) else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column)))
    }

    /// The column as bytes; [] for NULL or an empty blob.
    public func blob(_ column: Int32) -> [UInt8] {
        guard let bytes = sqlite3_column_blob(handle, column) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, column))
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    public func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    public func optionalDouble(_ column: Int32) -> Double? { isNull(column) ? nil : double(column) }
    public func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    public func optionalBlob(_ column: Int32) -> [UInt8]? { isNull(column) ? nil : blob(column) }

    /// The column in its stored class.
    public func value(_ column: Int32) -> SQLiteValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: .integer(int64(column))
        case SQLITE_FLOAT: .real(double(column))
        case SQLITE_TEXT: .text(text(column))
        case SQLITE_BLOB: .blob(blob(column))
        default: .null
        }
    }
}
