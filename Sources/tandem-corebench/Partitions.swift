import ArgumentParser
import Dispatch
import Synchronization
import TandemCore
import TandemEngine
#if canImport(Glibc)
import Glibc
#endif

/// The pure core split into partitions, as the coordinator runs them: P engines, each
/// holding one partition, each on its own thread, each shown every event (through the
/// ``PartitionFilter`` its MQTT session applies) and stepping every 100 events. No
/// broker, no store: what the pipelines themselves can do side by side on this
/// machine's cores.
struct PartitionsBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "partitions", abstract: "Engines of 1, 2, 4 ... partitions side by side on threads: events/s over wall time.")

    @Option(help: "Events per run.") var events = 400_000
    @Option(help: "Rooms the events go to.") var rooms = 200
    @Option(help: "Stickers per room.") var stickers = 10
    @Option(help: "Numbers of partitions to measure, comma-separated.") var partitions = "1,2,4"
    @Option(help: "Runs per number; the best is reported.") var repeats = 3

    func validate() throws {
        guard !counts.isEmpty, counts.allSatisfy({ Partitioning(count: $0) != nil }) else {
            throw ValidationError("--partitions: numbers from 1 to \(Partitioning.maximum), comma-separated, not \(partitions)")
        }
    }

    var counts: [Int] { partitions.split(separator: ",").compactMap { Int($0) } }

    func run() {
        let topics = Topics()
        let t0: Millis = 1_700_000_000_000
        // Creates first, then acquire/update/release cycles, spread over the rooms; each
        // room has one user (its owner), who holds its stickers in turn.
        var inputs: [(topic: String, payload: [UInt8])] = []
        inputs.reserveCapacity(events + rooms * stickers)
        for r in 0..<rooms {
            for s in 0..<stickers {
                let e = EditEvent(eventId: "c\(r)-\(s)", type: .create, stickerId: "s\(s)", timestamp: t0, image: CoreBenchmarks.image,
                                  frame: Frame(x: 1, y: 2, width: 3, height: 4))
                inputs.append((topics.roomEvents(room: "room\(r)", user: "u\(r)"), e.json().serialized()))
                let release = EditEvent(eventId: "r\(r)-\(s)", type: .release, stickerId: "s\(s)", timestamp: t0)
                inputs.append((topics.roomEvents(room: "room\(r)", user: "u\(r)"), release.json().serialized()))
            }
        }
        let kinds: [EditEvent.Kind] = [.acquire, .update, .release]
        for i in 0..<events {
            let r = i % rooms, s = (i / rooms) % stickers, kind = kinds[(i / (rooms * stickers)) % 3]
            // The timestamps follow the clock the runs step with: 31 ms every 100 events.
            let e = EditEvent(eventId: "e\(i)", type: kind, stickerId: "s\(s)", timestamp: t0 + 1 + Millis((inputs.count / 100) * 31),
                              frame: kind == .update ? Frame(x: Double(i % 100), y: 2, width: 3, height: 4) : nil)
            inputs.append((topics.roomEvents(room: "room\(r)", user: "u\(r)"), e.json().serialized()))
        }
        let all = inputs
        print("events: \(all.count) to \(rooms) rooms (\(stickers) stickers each), a step every 100 events each partition takes")
        var base: Double?
        for count in counts {
            var best = 0.0
            var kept: [Int] = []
            for _ in 0..<repeats {
                let (rate, perPartition) = Self.measure(all, partitions: count, t0: t0)
                if rate > best { best = rate; kept = perPartition }
            }
            base = base ?? best
            print("P=\(count): \(Int(best)) events/s (wall), x\(String(format: "%.2f", best / base!)) of P=\(counts[0]); events applied per partition \(kept)")
        }
    }

    /// Every partition's engine on a thread of its own (as many at once as the machine
    /// has cores); events/s is all the events over the time from the first start to the
    /// last end.
    static func measure(_ inputs: [(topic: String, payload: [UInt8])], partitions count: Int, t0: Millis) -> (Double, [Int]) {
        final class Box: Sendable {
            let times = Mutex<[(start: Double, end: Double, applied: Int)]>([])
        }
        let box = Box()
        DispatchQueue.concurrentPerform(iterations: count) { k in
            var c = EngineConfiguration()
            c.partitioning = Partitioning(count: count)!
            c.partition = k
            c.rateLimitPerSecond = 0
            var engine = Engine(configuration: c, epoch: "bench", now: t0)
            let filter = PartitionFilter(configuration: c)
            let start = Clock.wall
            var now = t0 + 1
            // Every partition steps on its own reorder window, whatever it holds: here
            // every 100 events offered (31 ms of the events' time).
            for (index, input) in inputs.enumerated() {
                if filter.keeps(topic: input.topic, payload: input.payload) {
                    _ = engine.ingest(topic: input.topic, payload: input.payload, now: now)
                }
                if index % 100 == 99 {
                    now += 31
                    _ = engine.step(now: now)
                }
            }
            _ = engine.flush(now: now + 31)
            let end = Clock.wall
            let m = engine.metrics
            if m.rejected > 0 { print("partition \(k): \(m.rejected) rejected: \(m.rejectionsByCode)") }
            box.times.withLock { $0.append((start, end, m.accepted)) }
        }
        let times = box.times.withLock { $0 }
        let wall = (times.map(\.end).max() ?? 0) - (times.map(\.start).min() ?? 0)
        return (Double(inputs.count) / wall, times.map(\.applied))
    }
}
