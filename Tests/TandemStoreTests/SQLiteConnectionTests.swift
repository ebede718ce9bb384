import Foundation
import Testing
@testable import TandemStore

@Suite struct SQLiteConnectionTests {
    @Test func bindsAndReadsEveryStorageClass() async throws {
        try await withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: "\(dir)/t.sqlite")
            try db.execute("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n)")
            try db.run("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)", [.integer(.min), .real(-1.5), "héllo", .blob([0, 1, 255]), nil])
            // Empty text and blobs must stay empty, not become NULL.
            try db.run("INSERT INTO t VALUES (0, 0, ?1, ?2, NULL)", [.text(""), .blob([])])
            let rows = try db.query("SELECT i, r, s, b, n FROM t ORDER BY rowid") { row in
                (0..<row.columnCount).map { row.value($0) }
            }
            #expect(rows[0] == [.integer(.min), .real(-1.5), .text("héllo"), .blob([0, 1, 255]), .null])
            #expect(rows[1][2] == .text(""))
            #expect(rows[1][3] == .blob([]))
            #expect(try db.queryOne("SELECT typeof(s) || typeof(b) FROM t WHERE i = 0") { $0.text(0) } == "textblob")
        }
    }

    @Test func errorsCarrySQLitesMessageAndTheSQL() async throws {
        try await withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: "\(dir)/t.sqlite")
            try db.execute("CREATE TABLE t(k TEXT PRIMARY KEY)")
            try db.run("INSERT INTO t VALUES ('a')")
            let error = try #require(throws: SQLiteError.self) { try db.run("INSERT INTO t VALUES ('a')") }
            #expect(error.code == .constraint)
            #expect(error.extendedCode == 1555) // SQLITE_CONSTRAINT_PRIMARYKEY
            #expect(error.message.contains("UNIQUE constraint failed: t.k"))
            #expect(error.context == "INSERT INTO t VALUES ('a')")
            let syntax = try #require(throws: SQLiteError.self) { try db.run("SELEKT 1") }
            #expect(syntax.message.contains("syntax error"))
        }
    }

    @Test func transactionRollsBackOnAnyError() async throws {
        struct Boom: Error {}
        try await withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: "\(dir)/t.sqlite")
            try db.execute("CREATE TABLE t(x INTEGER)")
            #expect(throws: Boom.self) {
                try db.transaction { db in
                    try db.run("INSERT INTO t VALUES (1)")
                    throw Boom()
                }
            }
            #expect(!db.isInTransaction)
            // Nested: the inner failure undoes only the inner writes.
            try db.transaction { db in
                try db.run("INSERT INTO t VALUES (2)")
                _ = try? db.transaction { db in
                    try db.run("INSERT INTO t VALUES (3)")
                    throw Boom()
                }
            }
            #expect(try db.query("SELECT x FROM t") { $0.int64(0) } == [2])
        }
    }

    @Test func migrationsRunOnceEachAndRecordTheirVersion() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/t.sqlite"
            let one = Migration(version: 1, name: "t", sql: "CREATE TABLE t(x INTEGER)")
            let two = Migration(version: 2, name: "u", sql: "CREATE TABLE u(x INTEGER)")
            do {
                let db = try SQLiteConnection(path: path)
                #expect(try db.migrate([one]) == (0, 1))
            }
            let db = try SQLiteConnection(path: path)
            #expect(try db.migrate([one, two]) == (1, 2))
            #expect(try db.migrate([one, two]) == (2, 2))
            #expect(try db.userVersion() == 2)

            let gap = try #require(throws: MigrationError.self) { try db.migrate([one, Migration(version: 3, name: "x", sql: "")]) }
            #expect(gap.code == .invalidMigrationList)
        }
    }

    @Test func aFailedMigrationLeavesThePreviousVersion() async throws {
        try await withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: "\(dir)/t.sqlite")
            let one = Migration(version: 1, name: "t", sql: "CREATE TABLE t(x INTEGER)")
            let bad = Migration(version: 2, name: "bad", sql: "CREATE TABLE u(x INTEGER); CREATE TABLE t(x INTEGER)")
            #expect(throws: SQLiteError.self) { try db.migrate([one, bad]) }
            #expect(try db.userVersion() == 1)
            #expect(try db.queryOne("SELECT count(*) FROM sqlite_schema WHERE name = 'u'") { $0.int64(0) } == 0)
        }
    }

    @Test func aClosedConnectionThrowsInsteadOfCrashing() async throws {
        try await withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: "\(dir)/t.sqlite")
            db.close()
            db.close()
            let error = try #require(throws: SQLiteError.self) { try db.execute("SELECT 1") }
            #expect(error.code == .misuse)
        }
    }
}

@Suite struct SQLiteStatementCacheTests {
    @Test func theSameSQLCanRunInsideItsOwnRowCallback() async throws {
        try await withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: "\(dir)/t.sqlite")
            try db.execute("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1), (2), (3)")
            let sql = "SELECT x FROM t WHERE x >= ?1 ORDER BY x"
            let pairs = try db.query(sql, [1]) { outer in
                let x = outer.int64(0)
                return (x, try db.query(sql, [.integer(x)]) { $0.int64(0) })
            }
            #expect(pairs.map(\.0) == [1, 2, 3])
            #expect(pairs.map(\.1) == [[1, 2, 3], [2, 3], [3]])
            // And the cached statement still works afterwards.
            #expect(try db.query(sql, [3]) { $0.int64(0) } == [3])
        }
    }

    /// Text and blobs are bound in place from a buffer per borrowed statement: a query
    /// run inside another's row callback, with longer values, must not disturb the outer
    /// one's (still bound while it steps), and a buffer that grows keeps working.
    @Test func textBoundInPlaceSurvivesANestedQueryWithLongerValues() async throws {
        try await withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: "\(dir)/t.sqlite")
            try db.execute("CREATE TABLE t(k TEXT, v BLOB)")
            let long = String(repeating: "x", count: 10_000)
            for key in ["a", "b", long] {
                try db.run("INSERT INTO t VALUES (?1, ?2)", [.text(key), .blob(Array(key.utf8.prefix(3)))])
            }
            let found = try db.query("SELECT k FROM t WHERE k >= ?1 AND v IS NOT ?2 ORDER BY k", [.text("a"), .blob([9])]) { outer in
                let key = outer.text(0)
                // Longer values than the outer statement's, in the next buffer.
                let inner = try db.queryOne("SELECT count(*) FROM t WHERE k <= ?1 AND k != ?2", [.text(key), .text(long + "y")]) { $0.int64(0) }
                return (key.count, inner ?? -1)
            }
            #expect(found.map(\.0) == [1, 1, 10_000])
            #expect(found.map(\.1) == [1, 2, 3])
            #expect(try db.queryOne("SELECT count(*) FROM t WHERE k = ?1", [.text(long)]) { $0.int64(0) } == 1)
        }
    }

    /// The statement cache keys SQL by its length and tail: statements that share both
    /// are still told apart, and the same SQL borrowed inside its own row callback (a
    /// second copy prepared) leaves one copy cached that still works.
    @Test func cachedStatementsAreToldApartAndANestedCopyIsKeptOnce() async throws {
        try await withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: "\(dir)/t.sqlite")
            try db.execute("CREATE TABLE t(k INTEGER)")
            for k in 1...3 { try db.run("INSERT INTO t VALUES (?1)", [.integer(Int64(k))]) }
            let tail = String(repeating: " ", count: 40) + "FROM t WHERE k >= ?1 ORDER BY k"
            let sums = "SELECT k + 100 " + tail, plain = "SELECT k + 200 " + tail
            #expect(sums.utf8.count == plain.utf8.count)
            #expect(try db.query(sums, [2]) { $0.int64(0) } == [102, 103])
            #expect(try db.query(plain, [2]) { $0.int64(0) } == [202, 203])
            let nested = try db.query(sums, [1]) { row in
                try db.query(sums, [.integer(row.int64(0) - 100)]) { $0.int64(0) }.count
            }
            #expect(nested == [3, 2, 1])
            #expect(try db.query(sums, [3]) { $0.int64(0) } == [103])
            #expect(try db.query(plain, [3]) { $0.int64(0) } == [203])
        }
    }
}
