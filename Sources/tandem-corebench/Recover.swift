import ArgumentParser
import TandemCoordinator
import TandemCore
import TandemStore

/// Times each part of the coordinator's recovery on an existing database, with the
/// store's and the core's public APIs, so a slow restart has a named cause.
struct Recover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Time the parts of recovery on a database.")

    @Option(help: "Database to read (not modified).") var database: String

    func run() async throws {
        let now = WallClock.now()
        func lap(_ label: String, _ t0: Double) { print("recover: \(label): \(Int((Clock.wall - t0) * 1000)) ms") }
        var t = Clock.wall
        let store = try TandemStore.open(path: database)
        lap("open", t)

        t = Clock.wall
        let rooms = try await store.loadEntities(kind: EntityKind.room)
        lap("load \(rooms.count) room rows", t)
        t = Clock.wall
        var parsed: [RoomState] = []
        for row in rooms { parsed.append(try RoomState(persisted: JSON.parse(row.body))) }
        lap("parse and rebuild \(parsed.count) rooms", t)

        t = Clock.wall
        let conversations = try await store.loadEntities(kind: EntityKind.conversation)
        var messages = 0
        for row in conversations {
            messages += try await store.latestMessages(conversation: row.key, limit: Conversation.windowSize).count
        }
        lap("load \(conversations.count) conversations with \(messages) messages (one query each)", t)

        t = Clock.wall
        let seen = try await store.loadSeenIds(since: now - CoordinatorConfiguration().seenIdRetentionMs)
        lap("load \(seen.count) seen ids", t)
        t = Clock.wall
        var set: [String: Int64] = [:]
        set.reserveCapacity(seen.count)
        for s in seen { set[s.userId + "\u{0}" + s.id] = s.seenAt }
        lap("index \(set.count) seen ids in a dictionary", t)

        t = Clock.wall
        let engine = try await Recovery.engine(configuration: CoordinatorConfiguration(), store: store, now: now)
        lap("Engine.recover in full (\(engine.summaryLine))", t)
        t = Clock.wall
        let snapshots = engine.allSnapshots()
        lap("allSnapshots(): \(snapshots.count) publications, \(snapshots.reduce(0) { $0 + $1.payload.count } / 1_048_576) MB", t)
        await store.close()
    }
}
