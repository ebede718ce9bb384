import Foundation
import Testing
@testable import TandemStore

/// The "tandem-wal" VFS (CSQLiteWAL): a commit's WAL frames are written in one call, and
/// are in the file, for every other connection and for a copy taken at once, when the
/// commit returns.
@Suite struct WALWriteGatheringTests {
    /// `rows` rows of `size` bytes each, in one transaction.
    private func insert(_ db: SQLiteConnection, rows: Range<Int>, size: Int) throws {
        try db.transaction { db in
            for i in rows {
                try db.run("INSERT INTO t(i, b) VALUES (?1, ?2)", [.integer(Int64(i)), .blob([UInt8](repeating: UInt8(i % 251), count: size))])
            }
        }
    }

    private func count(_ db: SQLiteConnection) throws -> Int64? {
        try db.queryOne("SELECT count(*) FROM t") { $0.int64(0) }
    }

    @Test func aCommitsFramesAreOneWriteAndOtherConnectionsSeeThemAtOnce() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/t.sqlite"
            let writer = try SQLiteConnection(path: path)
            try writer.execute("CREATE TABLE t(i INTEGER PRIMARY KEY, b BLOB)")
            var reader = SQLiteConnection.Options()
            reader.gathersWALWrites = false
            let other = try SQLiteConnection(path: path, options: reader)
            #expect(other.walWrites == nil)

            let before = try #require(writer.walWrites)
            // Some 25 pages of 4 KB: 50 frame writes asked for, about 100 KB, one write.
            try insert(writer, rows: 0..<50, size: 2_000)
            let after = try #require(writer.walWrites)
            #expect(after.asked - before.asked >= 50)
            #expect(after.made - before.made == 1)
            #expect(try count(other) == 50)

            // Commit after commit, each one write.
            for round in 1...5 {
                let start = try #require(writer.walWrites)
                try insert(writer, rows: (1_000 * round)..<(1_000 * round + 3), size: 100)
                let end = try #require(writer.walWrites)
                #expect(end.made - start.made == 1)
                #expect(end.asked - start.asked >= 2)
            }
            #expect(try count(other) == 65)
        }
    }

    @Test func aTransactionLargerThanTheBufferCommitsWhole() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/t.sqlite"
            let writer = try SQLiteConnection(path: path)
            try writer.execute("CREATE TABLE t(i INTEGER PRIMARY KEY, b BLOB)")
            // A small page cache: pages spill into the WAL before the commit, are read
            // back and written again (SQLite rewrites a spilled frame in place).
            try writer.execute("PRAGMA cache_size=50")
            let before = try #require(writer.walWrites)
            try insert(writer, rows: 0..<1_500, size: 3_000)
            try writer.transaction { db in
                _ = try db.run("UPDATE t SET b = zeroblob(2500) WHERE i % 3 = 0")
            }
            let after = try #require(writer.walWrites)
            // 4.5 MB: in pieces of at most 128 KB, far fewer than two a page.
            #expect(after.made - before.made > 30)
            #expect(after.made - before.made < (after.asked - before.asked) / 4)

            var options = SQLiteConnection.Options()
            options.gathersWALWrites = false
            let other = try SQLiteConnection(path: path, options: options)
            #expect(try count(other) == 1_500)
            #expect(try other.queryOne("SELECT sum(length(b)) FROM t") { $0.int64(0) } == 500 * 2_500 + 1_000 * 3_000)
            #expect(try other.queryOne("PRAGMA integrity_check") { $0.text(0) } == "ok")
        }
    }

    /// What the commit returned is in the files: a copy of the database and its WAL taken
    /// right after it (as a process killed there leaves them) recovers every row with
    /// SQLite's own VFS.
    @Test func aCopyTakenRightAfterACommitHasIt() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/t.sqlite"
            var options = SQLiteConnection.Options()
            options.autoCheckpoint = false
            let writer = try SQLiteConnection(path: path, options: options)
            try writer.execute("CREATE TABLE t(i INTEGER PRIMARY KEY, b BLOB)")
            for round in 0..<20 {
                try insert(writer, rows: (round * 10)..<(round * 10 + 10), size: 700)
            }
            let files = FileManager.default
            for suffix in ["", "-wal"] {
                try files.copyItem(atPath: path + suffix, toPath: "\(dir)/copy.sqlite" + suffix)
            }
            var plain = SQLiteConnection.Options()
            plain.gathersWALWrites = false
            let copy = try SQLiteConnection(path: "\(dir)/copy.sqlite", options: plain)
            #expect(try count(copy) == 200)
            #expect(try copy.queryOne("PRAGMA integrity_check") { $0.text(0) } == "ok")
        }
    }
}
