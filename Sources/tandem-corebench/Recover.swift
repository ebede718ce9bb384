#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import TandemCoordinator
import TandemCore
import TandemEngine
import TandemStore

/// Times each part of the coordinator's recovery on an existing database, with the
/// store's and the core's public APIs, so a slow restart has a named cause. Each line
/// also gives this process's resident memory after that part (VmRSS, and VmHWM: the
/// most it ever held).
struct Recover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Time the parts of recovery on a database.")

    @Option(help: "Database to read (not modified).") var database: String

    func run() async throws {
        let now = WallClock.now()
        func lap(_ label: String, _ t0: Double) {
            print("recover: \(label): \(Int((Clock.wall - t0) * 1000)) ms (\(residentMemory()))")
        }
        var t = Clock.wall
        let store = try SQLiteStore.open(path: database)
        lap("open", t)

        // Each part on its own: what it costs and holds.
        do {
            t = Clock.wall
            let rows = try await store.loadEntities(kind: EntityKind.room)
            lap("load \(rows.count) room rows (\(rows.reduce(0) { $0 + $1.body.count } / 1_048_576) MB of bodies)", t)
            t = Clock.wall
            let rooms = try await Engine.parseRooms(rows)
            lap("read \(rows.count) rooms: \(rooms.packed.count) packed, \(rooms.live.count) whole, \(rooms.rewritten.count) of the old format", t)
            t = Clock.wall
            var stickers = 0
            for room in rooms.packed { stickers += room.unpacked().stickerCount }
            lap("unpack every packed room once (\(stickers) stickers; the first event of each does this)", t)
        }
        do {
            t = Clock.wall
            let digests = try await store.loadSeenDigests(since: now - CoordinatorConfiguration().engine.seenIdRetentionMs)
            lap("load \(digests.count) remembered ids as digests", t)
        }
        t = Clock.wall
        let conversations = try await store.loadConversations(messageLimit: Conversation.windowSize)
        lap("load \(conversations.count) conversations with \(conversations.reduce(0) { $0 + $1.latestMessages.count }) messages (one store call)", t)

        t = Clock.wall
        let engine = try await Recovery.engine(configuration: CoordinatorConfiguration(), store: store, now: now)
        lap("Engine.recover in full (\(engine.summaryLine))", t)
        t = Clock.wall
        let snapshots = engine.allSnapshots()
        lap("allSnapshots(): \(snapshots.count) publications, \(snapshots.reduce(0) { $0 + $1.payload.count } / 1_048_576) MB", t)
        await store.close()
    }
}

/// "VmRSS 123 MB, VmHWM 456 MB" of this process, from /proc/self/status.
func residentMemory() -> String {
    guard let file = fopen("/proc/self/status", "r") else { return "VmRSS ?" }
    defer { fclose(file) }
    var parts: [String] = []
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        for key in ["VmRSS:", "VmHWM:"] where text.hasPrefix(key) {
            let kb = Int(text.dropFirst(key.count).filter(\.isNumber)) ?? 0
            parts.append("\(key.dropLast()) \(kb / 1024) MB")
        }
    }
    return parts.joined(separator: ", ")
}
