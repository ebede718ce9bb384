import ArgumentParser
import TandemCoordinator
import TandemCore
import TandemStore

/// Writes a coordinator database the way the coordinator would (the same Engine, the
/// same store batches, one transaction per step), without a broker: R rooms of S
/// stickers (each created and released), C active conversations with a message each,
/// and more room updates until the event log holds `--history` events. Used to measure
/// the coordinator's RSS with that state and its restart-to-online time.
struct Populate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Fill a database with rooms, conversations and an event history.")

    @Option(help: "Database to create (must not exist).") var database: String
    @Option var rooms = 10_000
    @Option var stickers = 50
    @Option var conversations = 10_000
    @Option(help: "Total events in the event log (at least what the rooms and conversations need).") var history = 1_000_000
    @Option(help: "Events per step (one transaction each).") var batch = 2_000

    func run() async throws {
        let store = try SQLiteStore.open(path: database)
        let configuration = CoordinatorConfiguration()
        var now = WallClock.now()
        var engine = try await Recovery.engine(configuration: configuration, store: store, now: now)
        let topics = Topics()
        var pending = 0
        var total = 0
        let started = Clock.wall

        func step(force: Bool = false) async throws {
            guard force || pending >= batch else { return }
            now += 31
            let s = engine.flush(now: now)
            try await store.commit(s.batch)
            engine.committed(through: s.number)
            pending = 0
        }
        func send(_ topic: String, _ payload: JSON) async throws {
            _ = engine.ingest(topic: topic, payload: payload.serialized(), now: now)
            pending += 1
            total += 1
            if total % 100_000 == 0 {
                print("populate: \(total) events, \(Int(Double(total) / (Clock.wall - started))) events/s")
            }
            try await step()
        }

        let image = CoreBenchmarks.image
        for r in 0..<rooms {
            for s in 0..<stickers {
                let user = "u\((r * stickers + s) % 1000)"
                let topic = topics.roomEvents(room: "room\(r)", user: user)
                try await send(topic, EditEvent(eventId: "c\(r).\(s)", type: .create, stickerId: "s\(s)", timestamp: now, image: image, frame: Frame(x: Double(s), y: 2, width: 120, height: 80)).json())
                try await send(topic, EditEvent(eventId: "r\(r).\(s)", type: .release, stickerId: "s\(s)", timestamp: now).json())
            }
        }
        for c in 0..<conversations {
            try await send(topics.dmCommands(user: "m\(c)"), DMCommand(commandId: "q\(c)", type: .request, peer: "n\(c)", timestamp: now, text: "hello from m\(c)").json)
        }
        try await step(force: true) // every accept must sort after its request
        for c in 0..<conversations {
            try await send(topics.dmCommands(user: "n\(c)"), DMCommand(commandId: "a\(c)", type: .accept, peer: "m\(c)", timestamp: now + 1).json)
        }
        var i = 0
        while total < history {
            let r = i % max(1, rooms), s = (i / max(1, rooms)) % max(1, stickers)
            let user = "u\((r * stickers + s) % 1000)"
            try await send(topics.roomEvents(room: "room\(r)", user: user), EditEvent(eventId: "h\(i)", type: .update, stickerId: "s\(s)", timestamp: now, frame: Frame(x: Double(i % 700), y: 3, width: 120, height: 80)).json())
            i += 1
            if i % (rooms * 2) == 0 {
                // Release what the updates acquired, so no lease runs out at restart.
                try await step(force: true)
            }
        }
        try await step(force: true)
        // Release every lock the updates took.
        for r in 0..<rooms {
            for s in 0..<stickers where i > 0 {
                let user = "u\((r * stickers + s) % 1000)"
                _ = engine.ingest(topic: topics.roomEvents(room: "room\(r)", user: user), payload: EditEvent(eventId: "z\(r).\(s)", type: .release, stickerId: "s\(s)", timestamp: now).json().serialized(), now: now)
            }
            if r % 100 == 99 { try await step(force: true) }
        }
        try await step(force: true)
        print("populate: \(engine.summaryLine); \(total) events + final releases in \(Int(Clock.wall - started)) s")
        await store.close()
    }
}
