import Foundation
import TandemCore
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

    /// Commits leave the log as it is: what the copies below recover is all in the WAL.
    private static let logKept = {
        var options = SQLiteConnection.Options()
        options.autoCheckpoint = false
        return options
    }()

    /// SQLite's own VFS, as the log is kept.
    private static let plain = {
        var options = logKept
        options.gathersWALWrites = false
        return options
    }()

    /// A new database in `dir` with the table `t`, and a connection to it.
    private func newDatabase(in dir: String) throws -> (path: String, writer: SQLiteConnection) {
        let path = "\(dir)/t.sqlite"
        let writer = try SQLiteConnection(path: path, options: Self.logKept)
        try writer.execute("CREATE TABLE t(i INTEGER PRIMARY KEY, b BLOB)")
        return (path, writer)
    }

    private func count(_ db: SQLiteConnection) throws -> Int64? {
        try db.queryOne("SELECT count(*) FROM t") { $0.int64(0) }
    }

    @Test func aCommitsFramesAreOneWriteAndOtherConnectionsSeeThemAtOnce() async throws {
        try await withTemporaryDirectory { dir in
            let (path, writer) = try newDatabase(in: dir)
            let other = try SQLiteConnection(path: path, options: Self.plain)
            #expect(other.walWrites == nil)

            let before = try #require(writer.walWrites)
            // Some 25 pages of 4 KB: 50 frame writes asked for, about 100 KB, one write
            // (one call takes up to 128 KiB: 0x1ffff bytes).
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
            let (path, writer) = try newDatabase(in: dir)
            // A small page cache: pages spill into the WAL before the commit, are read
            // back and written again (SQLite rewrites a spilled frame in place).
            try writer.execute("PRAGMA cache_size=50")
            let before = try #require(writer.walWrites)
            try insert(writer, rows: 0..<1_500, size: 3_000)
            try writer.transaction { db in
                _ = try db.run("UPDATE t SET b = zeroblob(2500) WHERE i % 3 = 0")
            }
            let after = try #require(writer.walWrites)
            // 4.5 MB: appends in pieces of at most 128 KB; spilled pages changed again are
            // written again where they are, one call each.
            #expect(after.made - before.made > 30)
            #expect(after.made - before.made < after.asked - before.asked)

            let other = try SQLiteConnection(path: path, options: Self.plain)
            #expect(try count(other) == 1_500)
            #expect(try other.queryOne("SELECT sum(length(b)) FROM t") { $0.int64(0) } == 500 * 2_500 + 1_000 * 3_000)
            #expect(try other.queryOne("PRAGMA integrity_check") { $0.text(0) } == "ok")
        }
    }

    /// The database and its WAL as a process killed at this moment leaves them, opened
    /// with SQLite's own VFS: what it recovers.
    private func copyRecovers(_ path: String, in dir: String) throws -> (rows: Int64?, integrity: String?) {
        let copyPath = "\(dir)/copy-\(UUID().uuidString).sqlite"
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: copyPath + suffix)
        }
        let copy = try SQLiteConnection(path: copyPath, options: Self.plain)
        return (try count(copy), try copy.queryOne("PRAGMA integrity_check") { $0.text(0) })
    }

    /// What the commit returned is in the files: a copy of the database and its WAL taken
    /// right after it recovers every row.
    @Test func aCopyTakenRightAfterACommitHasIt() async throws {
        try await withTemporaryDirectory { dir in
            let (path, writer) = try newDatabase(in: dir)
            for round in 0..<20 {
                try insert(writer, rows: (round * 10)..<(round * 10 + 10), size: 700)
            }
            let copy = try copyRecovers(path, in: dir)
            #expect(copy.rows == 200)
            #expect(copy.integrity == "ok")
        }
    }

    /// Two connections writing in turn: each one's commit starts where the other's ended
    /// (not where its own last write did), and a one-page commit's header then goes
    /// straight to the file while its page is gathered. Each commit is whole in the file
    /// when it returns.
    @Test func twoWritersTakingTurnsEachCommitWhole() async throws {
        try await withTemporaryDirectory { dir in
            let (path, first) = try newDatabase(in: dir)
            let second = try SQLiteConnection(path: path, options: Self.logKept)
            for round in 0..<10 {
                try insert(round % 2 == 0 ? first : second, rows: round..<(round + 1), size: 50)
                let copy = try copyRecovers(path, in: dir)
                #expect(copy.rows == Int64(round + 1))
                #expect(copy.integrity == "ok")
                #expect(try count(round % 2 == 0 ? second : first) == Int64(round + 1))
            }
        }
    }

    /// A transaction whose pages spilled into the WAL and were changed again: SQLite writes
    /// those frames again, and after the commit frame it writes each later frame's header
    /// again (new checksums), the commit frame's last. Those rewrites go straight to the
    /// file, or the copy would recover nothing of the transaction.
    @Test func aSpilledTransactionsRewrittenFramesAreInTheFile() async throws {
        try await withTemporaryDirectory { dir in
            let (path, writer) = try newDatabase(in: dir)
            try writer.execute("PRAGMA cache_size=10")
            try writer.transaction { db in
                try insert(db, rows: 0..<300, size: 3_000)
                _ = try db.run("UPDATE t SET b = zeroblob(2500) WHERE i % 3 = 0")
            }
            let copy = try copyRecovers(path, in: dir)
            #expect(copy.rows == 300)
            #expect(copy.integrity == "ok")
        }
    }

    /// A transaction that spilled and rolled back leaves frames that belong to no commit
    /// in the buffer: they are dropped, never written over what another connection
    /// appends next.
    @Test func aRolledBackTransactionsLeftoversNeverLandOnAnotherWritersFrames() async throws {
        struct Abandon: Error {}
        try await withTemporaryDirectory { dir in
            let (path, writer) = try newDatabase(in: dir)
            try insert(writer, rows: 0..<5, size: 100)
            // Everything in the database file and the log empty: undoing the transaction
            // below then reads nothing from the log (which would write the buffer).
            _ = try writer.queryOne("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int64(0) }
            try writer.execute("PRAGMA cache_size=10")
            #expect(throws: Abandon.self) {
                try writer.transaction { db in
                    try insert(db, rows: 1_000..<1_200, size: 3_000)
                    throw Abandon()
                }
            }
            let other = try SQLiteConnection(path: path, options: Self.plain)
            try insert(other, rows: 10..<20, size: 500)
            // The writer uses the WAL again (a read, then a commit).
            #expect(try count(writer) == 15)
            try insert(writer, rows: 20..<25, size: 100)
            #expect(try count(other) == 20)
            #expect(try other.queryOne("PRAGMA integrity_check") { $0.text(0) } == "ok")
            let copy = try copyRecovers(path, in: dir)
            #expect(copy.rows == 20)
            #expect(copy.integrity == "ok")
        }
    }

    /// Commits, commits that spill and rewrite, rollbacks after spills, savepoints undone
    /// and checkpoints of every mode, by two writers and a checkpointer in a seeded order:
    /// after each step a copy of the files holds exactly the rows committed so far.
    @Test(arguments: [1, 2, 3]) func everyCommitAndNothingElseIsInTheFiles(seed: Int) async throws {
        struct Abandon: Error {}
        try await withTemporaryDirectory { dir in
            var random = SplitMix64(seed: UInt64(seed))
            let (path, first) = try newDatabase(in: dir)
            let second = try SQLiteConnection(path: path, options: Self.logKept)
            let checkpointer = try SQLiteConnection(path: path, options: Self.plain)
            for db in [first, second] { try db.execute("PRAGMA cache_size=20") }
            var committed: Int64 = 0
            var next = 0
            for step in 0..<40 {
                let db = Bool.random(using: &random) ? first : second
                let rows = [1, 3, 40, 150][Int.random(in: 0..<4, using: &random)]
                let range = next..<(next + rows)
                next += rows
                switch Int.random(in: 0..<5, using: &random) {
                case 0:
                    #expect(throws: Abandon.self) {
                        try db.transaction { db in
                            try insert(db, rows: range, size: 3_000)
                            throw Abandon()
                        }
                    }
                case 1:
                    try db.transaction { db in
                        _ = try? db.transaction { db in
                            try insert(db, rows: range, size: 3_000)
                            throw Abandon()
                        }
                        try insert(db, rows: (range.upperBound + 1_000_000)..<(range.upperBound + 1_000_001), size: 10)
                    }
                    committed += 1
                case 2:
                    let mode = ["PASSIVE", "RESTART", "TRUNCATE"][Int.random(in: 0..<3, using: &random)]
                    _ = try checkpointer.queryOne("PRAGMA wal_checkpoint(\(mode))") { $0.int64(0) }
                default:
                    try db.transaction { db in
                        try insert(db, rows: range, size: rows > 3 ? 3_000 : 100)
                        // Spilled pages changed again: SQLite rewrites their frames.
                        _ = try db.run("UPDATE t SET b = zeroblob(2000) WHERE i >= ?1 AND i % 2 = 0", [.integer(Int64(range.lowerBound))])
                    }
                    committed += Int64(rows)
                }
                let copy = try copyRecovers(path, in: dir)
                #expect(copy.rows == committed, "step \(step)")
                #expect(copy.integrity == "ok", "step \(step)")
                #expect(try count(checkpointer) == committed, "step \(step)")
            }
        }
    }
}
