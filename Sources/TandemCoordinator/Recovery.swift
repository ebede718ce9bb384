import TandemCore
import TandemEngine

/// Rebuilds engines from a store: the I/O of a restart, kept out of the engine, which is
/// built from the values read here (``Engine/init(configuration:epoch:recovered:now:)``).
public enum Recovery {
    public static func engine(configuration: CoordinatorConfiguration, store: some CoordinatorStore, now: Millis) async throws -> Engine {
        let recovered = try await read(configuration: configuration, store: store, now: now)
        return try Engine(configuration: configuration.engine, epoch: store.epoch, recovered: recovered, now: now)
    }

    /// What the store holds, read once for every partition of this process: each
    /// partition's engine keeps its own rooms, conversations and workouts of it
    /// (``Engine/init(configuration:epoch:recovered:now:)``).
    public static func read(configuration: CoordinatorConfiguration, store: some CoordinatorStore, now: Millis) async throws -> Engine.Recovered {
        let roomRows = try await store.loadEntities(kind: EntityKind.room)
        // The store reads the remembered ids of the memory window (as digests) on its own
        // thread while this task reads the rooms: the two largest parts of a restart,
        // overlapped. Older ones stay in the store, which answers for them. The window
        // ends at the latest remembered id if that is behind the clock (the coordinator
        // was away, and the broker kept what came meanwhile: those events are judged by
        // memory then, not one by one by the store).
        let latest = try await store.latestSeenAt() ?? now
        let seenSince = RememberedIds.windowEnd(wall: now, frontier: latest) - configuration.engine.seenIdWindowMs
        async let seenDigests = store.loadSeenDigests(since: seenSince)
        var recovered = Engine.Recovered()
        recovered.rooms = try await Engine.parseRooms(roomRows, members: store.loadRoomMembers())
        recovered.conversations = try await store.loadConversations(messageLimit: Conversation.windowSize)
        recovered.workouts = try await store.loadEntities(kind: EntityKind.workout)
        recovered.seenDigests = try await seenDigests
        recovered.seenSince = seenSince
        return recovered
    }
}
