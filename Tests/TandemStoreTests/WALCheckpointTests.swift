import Foundation
import Synchronization
import Testing
import TandemCore
@testable import TandemStore

/// The WAL of a writer that never checkpoints (`checkpoints: .separate`) stays small:
/// the checkpointer's passes start it over, with a reader reading all along.
/// Counted in commits and passes, never in time.
@Suite struct WALCheckpointTests {
    /// A batch like the coordinator's: new ids spread over the key space (so each commit
    /// touches several index pages), their event-log rows and a room's current state.
    static func batch(_ n: Int, size: Int = 20) -> StoreBatch {
        var batch = StoreBatch()
        for i in 0..<size {
            let user = "user\((n * 7 + i) % 50)"
            let id = "e\(n)-\(i)-\(String((n &* 2_654_435_761 &+ i) & 0xFFFF_FFFF, radix: 36))"
            let at = Millis(1_700_000_000_000 + n)
            batch.seenIds.append(SeenId(userId: user, id: id, kind: .room, seenAt: at,
                                        original: Receipt.Original(status: .accepted, code: nil, version: Int64(n))))
            batch.events.append(EventLogRow(at: at, kind: .room, userId: user, target: "r\(n % 50)", id: id,
                                            status: .accepted, code: nil, version: Int64(n),
                                            payload: Array(#"{"eventId":"\#(id)","type":"update"}"#.utf8)))
        }
        batch.entities = [EntityRow(kind: EntityKind.room, key: "r\(n % 50)", version: Int64(n),
                                    body: [UInt8](repeating: UInt8(n & 0xFF), count: 600), updatedAt: Millis(n))]
        return batch
    }

    static func walBytes(_ path: String) -> Int64 { Int64(Platform.fileSize(path + "-wal")) }

    /// A reader that reads until cancelled, one short read transaction after another (as
    /// the query reader and the id checks do); returns how many reads it made.
    static func busyReader(_ reader: SQLiteStore) -> Task<Int, any Error> {
        Task {
            var reads = 0
            while !Task.isCancelled {
                _ = try await reader.eventLog(after: 0, limit: 20)
                _ = try await reader.seenId(user: "user1", id: "e1-0-x")
                reads += 1
            }
            return reads
        }
    }

    @Test func passesStartTheWALOverWhileAReaderReads() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/tandem.sqlite"
            let writer = try SQLiteStore.open(path: path, checkpoints: .separate)
            let checkpointer = try SQLiteStore.openCheckpointer(path: path)
            var wal = WALCheckpointer(writer: writer, checkpointer: checkpointer, restartAboveFrames: 16)
            let reader = try SQLiteStore.openReader(path: path)
            let reading = Self.busyReader(reader)

            for n in 0..<25 { try await writer.commit(Self.batch(n)) }

            var restarts = 0
            var largest: Int64 = 0
            // Frames written over all rounds: what the WAL would hold without restarts.
            var frames = 0
            for round in 1...40 {
                for n in 0..<25 { try await writer.commit(Self.batch(round * 25 + n)) }
                largest = max(largest, Self.walBytes(path))
                let pass = try await wal.pass()
                #expect(pass.restartTried)
                if pass.restarted { restarts += 1 }
                frames += pass.walFrames
            }
            reading.cancel()
            #expect(try await reading.value > 0)
            // Every pass started the WAL over (a reader reading never holds it for long):
            // each round wrote its frames from the file's beginning, so the file is as
            // large as the largest round (rounds grow a little with the tables), not as
            // all of them (over 25,000 frames: 100 MB).
            #expect(restarts == 40)
            #expect(largest * 8 < Int64(frames) * 4_096, "largest WAL \(largest) bytes, \(frames) frames written")
            // What is left is all copied: the next commit starts the WAL over.
            let last = try await checkpointer.checkpoint()
            #expect(last.walFrames == last.checkpointed)
            #expect(try await writer.summary().seenIds == 41 * 25 * 20)
            await reader.close()
            await checkpointer.close()
            await writer.close()
        }
    }

    /// The coordinator's arrangement: the writer commits back to back on its own
    /// executor, the checkpointer passes beside it, a reader reads. No commit fails
    /// (the writer waits for a restart's write lock), and the WAL stays bounded.
    @Test func theWriterWaitsForRestartsAndTheWALStaysBounded() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/tandem.sqlite"
            let writer = try SQLiteStore.open(path: path, checkpoints: .separate)
            let checkpointer = try SQLiteStore.openCheckpointer(path: path)
            var wal = WALCheckpointer(writer: writer, checkpointer: checkpointer, restartAboveFrames: 64)
            let reader = try SQLiteStore.openReader(path: path)
            let reading = Self.busyReader(reader)
            let commits = 1_000
            let done = Flag()
            let writing = Task {
                defer { done.set() }
                var largest: Int64 = 0
                for n in 0..<commits {
                    try await writer.commit(Self.batch(n))
                    largest = max(largest, Self.walBytes(path))
                }
                return largest
            }
            var tried = 0
            var restarts = 0
            // Passes one after another until the writer is done.
            while !done.isSet {
                let pass = try await wal.pass()
                if pass.restartTried { tried += 1 }
                if pass.restarted { restarts += 1 }
            }
            let largest = try await writing.value
            reading.cancel()
            _ = try await reading.value
            // Every restart tried started the WAL over: queued between two commits, it
            // never waits for the writer, and readers let go at once.
            #expect(restarts > 0)
            #expect(restarts == tried)
            // Without restarts the WAL would hold every commit: measured by the file the
            // writer alone makes of the same commits below.
            #expect(try await writer.summary().seenIds == commits * 20)
            await reader.close()
            await checkpointer.close()
            await writer.close()

            let alonePath = "\(dir)/alone.sqlite"
            let alone = try SQLiteStore.open(path: alonePath, checkpoints: .separate)
            for n in 0..<commits { try await alone.commit(Self.batch(n)) }
            let unbounded = Self.walBytes(alonePath)
            await alone.close()
            #expect(largest < unbounded / 2, "largest WAL \(largest) bytes; without checkpoints \(unbounded)")
        }
    }

    /// `journal_size_limit`: the first commit into a restarted WAL cuts the file back.
    @Test func aRestartedWALIsCutBackToTheLimit() async throws {
        try await withTemporaryDirectory { dir in
            let path = "\(dir)/tandem.sqlite"
            var options = SQLiteStore.writerOptions(synchronous: .normal, checkpoints: .separate)
            options.journalSizeLimitBytes = 256 * 1024
            let writer = try SQLiteStore.open(path: path, options: options)
            for n in 0..<100 { try await writer.commit(Self.batch(n)) }
            #expect(Self.walBytes(path) > 1_000_000)
            #expect(try await writer.restartWAL())
            // Restarted, but the file keeps its size until the next commit writes into it.
            try await writer.commit(Self.batch(100))
            #expect(Self.walBytes(path) <= 256 * 1024)
            #expect(try await writer.summary().seenIds == 101 * 20)
            await writer.close()
        }
    }
}

/// Set once, read from anywhere.
final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
