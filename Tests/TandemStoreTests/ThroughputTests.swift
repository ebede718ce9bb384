import Foundation
import Testing
import TandemCore
@testable import TandemStore

/// Rough batch throughput, printed for the record (no threshold: machines differ).
/// A batch is what the coordinator commits after one reorder window: here 100 events,
/// each a seen id, an event-log row and one ~2 KB entity upsert, over 50 rooms.
/// Set TANDEM_STORE_BENCH_BATCHES for a longer run.
@Suite(.serialized) struct ThroughputTests {
    @Test(arguments: [SQLiteConnection.Synchronous.normal, .full])
    func batchOfHundredEvents(synchronous: SQLiteConnection.Synchronous) async throws {
        let batches = ProcessInfo.processInfo.environment["TANDEM_STORE_BENCH_BATCHES"].flatMap(Int.init) ?? 50
        try await withTemporaryDirectory { dir in
            let store = try SQLiteStore.open(path: "\(dir)/bench.sqlite", synchronous: synchronous)
            let body = [UInt8](repeating: UInt8(ascii: "x"), count: 2_048)
            let payload = Array(#"{"eventId":"e","type":"update","stickerId":"s1","timestamp":1763740000000,"frame":{"x":1,"y":2,"width":3,"height":4}}"#.utf8)
            var total = Duration.zero
            for b in 0..<batches {
                var batch = StoreBatch()
                for i in 0..<100 {
                    let n = b * 100 + i
                    let at = Millis(1_763_740_000_000 + n)
                    batch.seenIds.append(SeenId(userId: "user\(n % 20)", id: "event-\(n)", kind: .room, seenAt: at))
                    batch.events.append(EventLogRow(at: at, kind: .room, userId: "user\(n % 20)", target: "room\(n % 50)",
                                                    id: "event-\(n)", status: .accepted, code: nil,
                                                    version: Int64(n / 50 + 1), payload: payload))
                    batch.entities.append(EntityRow(kind: EntityKind.room, key: "room\(n % 50)", version: Int64(n / 50 + 1),
                                                    body: body, updatedAt: at))
                }
                let start = ContinuousClock.now
                try await store.commit(batch)
                total += ContinuousClock.now - start
            }
            let seconds = Double(total.components.seconds) + Double(total.components.attoseconds) / 1e18
            let events = Double(batches * 100)
            print("""
                SQLiteStore throughput (synchronous=\(synchronous.rawValue)): \(batches) batches of 100 events, \
                \(Int(events / seconds)) events/s, \(String(format: "%.2f", seconds * 1000 / Double(batches))) ms per batch
                """)
            #expect(try await store.summary().events == batches * 100)
        }
    }
}
