#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import TandemCore
import TandemEngine
import TandemStore

/// What a restore costs the pipeline (issue 35: at most 5 ms on a room of 1,000
/// stickers), part by part, with the coordinator's own Engine and a real SQLite file:
/// the room at its version read from the history (the partition waits for it), the step
/// that applies the restore (the whole room's change, snapshot and checkpoint), and that
/// step's commit. Each restore goes back to the version that needs the longest replay:
/// a checkpoint and 99 rows after it.
struct RestoreBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "restore", abstract: "Time a restore on a large room: read, step, commit.")

    @Option(help: "Stickers in the room.") var stickers = 1_000
    @Option(help: "Restores to time.") var repeats = 50
    @Option(help: "Where to put the SQLite file (a new one is made, then removed).") var directory = "/tmp"

    func run() async throws {
        let path = "\(directory)/tandem-restore-bench-\(getpid()).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        let store = try SQLiteStore.open(path: path)
        let reader = try SQLiteStore.openReader(path: path)
        var configuration = EngineConfiguration()
        configuration.rateLimitPerSecond = 0
        configuration.maxStickersPerRoom = max(stickers, configuration.maxStickersPerRoom)
        var now: Millis = 1_800_000_000_000
        var engine = Engine(configuration: configuration, epoch: store.epoch, now: now)
        let topic = "tandem/v1/rooms/bench/events/alice"

        func step() async throws -> Engine.Step {
            now += configuration.reorderWindowMs + 1
            let step = engine.step(now: now)
            try await store.commit(step.batch)
            engine.committed(through: step.number)
            return step
        }
        // The room: every sticker made in one step (a checkpoint at its end), then 100
        // moves of one sticker; the version before the last is 99 rows past the checkpoint.
        for i in 0..<stickers {
            let create = EditEvent(eventId: "c\(i)", type: .create, stickerId: "s\(i)", timestamp: now,
                                   image: "sticker-\(i % 12).png", frame: Frame(x: Double(i % 40) * 20, y: Double(i / 40) * 20, width: 64, height: 64))
            _ = engine.ingest(topic: topic, payload: create.json().serialized(), now: now)
        }
        _ = try await step()
        for i in 0..<100 {
            let move = EditEvent(eventId: "m\(i)", type: .update, stickerId: "s0", timestamp: now, frame: Frame(x: Double(i), y: 5, width: 64, height: 64))
            _ = engine.ingest(topic: topic, payload: move.json().serialized(), now: now)
        }
        let target = Int64(stickers) + 99
        _ = try await step()

        var read: [Double] = [], apply: [Double] = [], commit: [Double] = []
        var checkpointBytes = 0
        for r in 0..<repeats {
            _ = engine.ingest(topic: topic, payload: EditEvent(eventId: "r\(r)", restoringTo: target, timestamp: now).json().serialized(), now: now)
            now += configuration.reorderWindowMs + 1
            let held = engine.step(now: now)
            try await store.commit(held.batch)
            engine.committed(through: held.number)
            guard let request = engine.pendingRoomLoad else {
                let answer = held.publications.last.map { String(decoding: $0.payload, as: UTF8.self) } ?? "nothing"
                throw ValidationError("the restore did not wait for its room: \(answer)")
            }

            var t = Clock.wall
            let loaded = try await reader.roomStickers(room: request.roomId, at: request.version)
            read.append((Clock.wall - t) * 1000)
            guard let loaded, loaded.count == stickers else { throw ValidationError("the history did not give the room back whole") }
            engine.roomLoaded(request, .stickers(loaded))

            // The step's own CPU time: what it costs the pipeline's thread, whatever else
            // the machine runs.
            t = Clock.threadCPU
            let applied = engine.step(now: now)
            apply.append((Clock.threadCPU - t) * 1000)
            checkpointBytes = applied.batch.roomCheckpoints.reduce(0) { $0 + $1.body.count }

            t = Clock.wall
            try await store.commit(applied.batch)
            commit.append((Clock.wall - t) * 1000)
            engine.committed(through: applied.number)
        }
        await reader.close()
        await store.close()

        func line(_ label: String, _ ms: [Double]) -> String {
            let sorted = ms.sorted()
            let p50 = sorted[sorted.count / 2], p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
            return "\(label): p50 \(format(p50)) ms, p99 \(format(p99)) ms, max \(format(sorted.last ?? 0)) ms"
        }
        print("restore of a room of \(stickers) stickers to a version 99 rows past its checkpoint, \(repeats) times (checkpoint \(checkpointBytes) bytes)")
        print(line("  read the room at its version (the partition waits)", read))
        print(line("  the step that applies it (its CPU time)", apply))
        print(line("  that step's commit", commit))
        print(line("  the pipeline's whole pause (read + step + commit)", zip(zip(read, apply), commit).map { $0.0 + $0.1 + $1 }))
    }

    func format(_ ms: Double) -> String {
        let hundredths = Int((ms * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }
}
