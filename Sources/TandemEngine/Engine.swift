import TandemCore

/// The coordinator's state and rules, with no I/O: messages in, a store batch and the
/// publications it allows out.
///
/// ``ingest(topic:payload:now:)`` takes one inbound message at once: topic and payload
/// checks, duplicate ids, and telemetry (which does not wait) are decided there, and
/// events and commands go into the reorder buffer. ``step(now:)`` releases what the
/// window lets go, applies it in order, runs lock and presence expiry and throttled
/// workout snapshots, and returns a ``Step``: what to persist in one transaction and
/// what to publish once that transaction is committed.
public struct Engine: Sendable {
    public struct Step: Sendable {
        public var batch = StoreBatch()
        public var publications: [Publication] = []
        /// Who gained or lost the right to read a room in this step: the service has the
        /// broker enforce them before it publishes the step.
        public var access: [RoomAccessChange] = []
        /// Steps are numbered from 1 in the order the engine made them; tell it when one
        /// is committed (``committed(through:)``).
        public var number = 0
    }

    /// One event or command waiting in the reorder buffer.
    struct Buffered {
        enum Command {
            case room(roomId: String, event: EditEvent)
            case dm(DMCommand)
            case workout(workoutId: String, device: Device, control: WorkoutControl)
        }

        var user: String
        var id: String
        var command: Command
        var payload: [UInt8]
        /// When it was ingested (set by ``admit``), for the receipt's timing.
        var arrival: Millis = 0
    }

    struct LeaseDeadline: Comparable {
        var at: Millis
        var roomId: String
        static func < (a: LeaseDeadline, b: LeaseDeadline) -> Bool { (a.at, a.roomId) < (b.at, b.roomId) }
    }

    public let configuration: EngineConfiguration
    let topics: Topics
    public let epoch: String
    public var metrics = Metrics()

    /// Rooms an event touched since they were last packed, whole.
    var rooms: [String: RoomState] = [:]
    /// Every other room, as its persisted body (``PackedRoom``): unpacked on its first
    /// event, packed again when idle (``packIdleRooms(now:)``). A room is in one or the other.
    var packedRooms: [String: PackedRoom] = [:]
    var conversations: [ConversationKey: Conversation] = [:]
    /// The `seq` of the last stored message of each conversation.
    var messageSeq: [ConversationKey: Int64] = [:]
    var workouts: [WorkoutKey: WorkoutState] = [:]
    var remembered: RememberedIds
    /// Ids whose digest was remembered, waiting for the store to say (``takeIdChecks()``).
    var idChecks: [IdCheck] = []
    var buckets: [String: TokenBucket] = [:]
    /// How many conversations each user is part of (for the per-user cap).
    var conversationCount: [String: Int] = [:]
    var buffer: ReorderBuffer<Buffered>
    var presence: PresenceTracker
    var leaseDeadlines = MinHeap<LeaseDeadline>()
    /// Running workouts changed by telemetry whose snapshot waits for the throttle.
    var workoutSnapshotDue: [WorkoutKey: Millis] = [:]
    var workoutLastPublished: [WorkoutKey: Millis] = [:]
    /// Snapshots still to republish after a start, a chunk per step (see
    /// ``startRepublishing(now:)``), each built from the state of its turn.
    var republishQueue: [Republish] = []
    var republishIndex = 0
    var republishDue: Millis?
    /// Snapshots republished per chunk, and the pause between chunks: 30,000 snapshots
    /// go out in 1.5 s without holding them all in memory at once.
    static let republishChunk = 200
    static let republishPauseMs: Millis = 10

    /// The snapshots of a conversation (both views) that wait for their pacing
    /// (``CoordinatorConfiguration/conversationSnapshotIntervalMs``), and when each
    /// conversation's snapshots last went out.
    var conversationSnapshotDue: [ConversationKey: Millis] = [:]
    var conversationLastSnapshot: [ConversationKey: Millis] = [:]
    /// The changes of each conversation since its last snapshot, in version order: what a
    /// `dmChanges` request is answered from. Only conversations whose snapshot is due
    /// have any, so this holds at most one pacing interval of changes.
    var conversationChangesSinceSnapshot: [ConversationKey: [ConversationChange]] = [:]

    enum Republish {
        case room(String)
        case conversation(ConversationKey)
        case workout(WorkoutKey)
    }

    /// Queries that passed their checks and need the store: the service answers them
    /// (``takeQueries()``) right after the ingest that let them in.
    var queries: [Query] = []

    /// A DM history or logbook request from `user`, decoded and within the rate limit.
    public struct Query: Sendable {
        public var user: String
        public var request: ClientRequest
    }

    /// The broker's users when the service administers them (``setKnownUsers(_:)``).
    var knownUsers: Set<String>?

    /// The wall clock at the current ingest or step (``Now``); every `now` inside the
    /// engine is the tick.
    var wall: Millis = 0

    /// What ingest decided that must be persisted with the next step (telemetry).
    var pendingBatch = StoreBatch()

    /// Room history (``RoomHistory``): each room's latest checkpoint this engine wrote
    /// (none yet: the first change writes one of the room as it was), and when expired
    /// history was last forgotten.
    var lastCheckpoint: [String: Int64] = [:]
    var lastHistoryForget: Millis = 0
    /// Released events that wait for a restore's room to be read from the history
    /// (``pendingRoomLoad``), in order; applied first by the next step.
    var held: [Buffered] = []
    /// The room a held restore needs (``roomLoaded(_:_:)``); nil when none waits.
    public internal(set) var pendingRoomLoad: RoomVersionRequest?
    /// Rooms read for restores, until the restore that asked is applied.
    var roomLoads: [RoomVersionRequest: RoomLoad] = [:]

    /// What the store said of a room at a version.
    public enum RoomLoad: Sendable, Equatable {
        /// Its stickers right after that version, in creation order.
        case stickers([Sticker])
        /// The history no longer reaches that version (`history_gone`).
        case gone
        /// The store could not be read.
        case failed
    }

    public init(configuration: EngineConfiguration, epoch: String, now: Millis) {
        self.configuration = configuration
        self.topics = Topics(root: configuration.topicRoot)
        self.epoch = epoch
        self.buffer = ReorderBuffer(window: configuration.reorderWindowMs)
        self.presence = PresenceTracker(grace: configuration.presenceGraceMs)
        self.wall = now
        self.lastHistoryForget = now
        self.remembered = RememberedIds(older: IdDigests(since: now), now: now)
    }

    // MARK: Recovery

    /// What a restart read from the store, as values (``Recovery`` does the reading).
    public struct Recovered: Sendable {
        public typealias StoredConversation = TandemCore.StoredConversation

        public var rooms = Rooms()
        public var conversations: [StoredConversation] = []
        public var workouts: [EntityRow] = []
        /// The remembered ids, as the store's digests (``CoordinatorStore/loadSeenDigests(since:)``):
        /// every id whose horizon (``RememberedIds``) is at or after `seenSince`.
        public var seenDigests = IdDigests(since: 0)
        public var seenSince: Millis = .min

        public init() {}

        /// The rooms as read (``Engine/parseRooms(_:)``): those holding a lock whole, the
        /// rest packed, and the rows to write again where a body was in the old format.
        public struct Rooms: Sendable {
            public var live: [RoomState] = []
            public var packed: [PackedRoom] = []
            public var rewritten: [EntityRow] = []

            public init() {}

            /// Every open room's readers, over all partitions (``Engine/roomAccess`` of one
            /// engine that held them all): what the broker's access is reconciled to before
            /// the partitions' engines are built.
            public var access: [String: Set<String>] {
                Engine.readers(live: live, packed: packed)
            }

            mutating func add(_ other: Rooms) {
                live += other.live
                packed += other.packed
                rewritten += other.rewritten
            }
        }
    }

    /// Rebuilds the state from the store's current-state rows (no history replay).
    public init(configuration: EngineConfiguration, epoch: String, recovered: Recovered, now: Millis) throws {
        self.init(configuration: configuration, epoch: epoch, now: now)
        // With several partitions the store holds them all: this engine keeps its own
        // rooms, conversations and workouts (the same rule that places their messages).
        // (With one partition every key's partition is 0, this engine's.)
        let partitioning = configuration.partitioning
        let mine = configuration.partition
        for room in recovered.rooms.live where partitioning.partition(ofRoom: room.roomId) == mine {
            rooms[room.roomId] = room
            trackLease(of: room)
        }
        packedRooms.reserveCapacity(recovered.rooms.packed.count / partitioning.count)
        for room in recovered.rooms.packed where partitioning.partition(ofRoom: room.roomId) == mine {
            packedRooms[room.roomId] = room
        }
        // Bodies of the old format go back to the store in the binary one with the first
        // step, so that the next start reads them fast.
        pendingBatch.entities = recovered.rooms.rewritten.filter { partitioning.partition(ofRoom: $0.key) == mine }
        for stored in recovered.conversations {
            let messages = stored.latestMessages.map { DirectMessage(id: $0.id, sender: $0.sender, text: $0.text, sentAt: $0.sentAt, isRead: $0.isRead) }
            let conversation = try Conversation(persisted: JSON.parse(stored.row.body), messages: messages)
            guard partitioning.partition(ofConversation: conversation.key.low, conversation.key.high) == mine else { continue }
            conversations[conversation.key] = conversation
            conversationCount[conversation.key.low, default: 0] += 1
            conversationCount[conversation.key.high, default: 0] += 1
            messageSeq[conversation.key] = stored.latestMessages.last?.seq ?? 0
        }
        for row in recovered.workouts {
            let workout = try WorkoutState(persisted: JSON.parse(row.body))
            guard partitioning.partition(ofUser: workout.user) == mine else { continue }
            workouts[WorkoutKey(user: workout.user, workoutId: workout.workoutId)] = workout
        }
        remembered = RememberedIds(
            older: recovered.seenDigests.isEmpty ? IdDigests(since: now) : recovered.seenDigests,
            heldSince: recovered.seenSince, now: now)
    }

    /// Reads rooms from their rows in a few tasks at once (each room is its own value),
    /// spread over the cores: each body is read whole (so a bad one stops the start), and
    /// a room that holds no lock is kept packed as its body. Bodies of the old format
    /// (JSON) are written anew in the binary one (`rewritten`).
    /// `members`: every room's member rows (``CoordinatorStore/loadRoomMembers()``); a
    /// room without any is closed.
    public static func parseRooms(_ rows: [EntityRow], members memberRows: [RoomMemberRow] = []) async throws -> Recovered.Rooms {
        var grouped: [String: [RoomMemberRow]] = [:]
        for row in memberRows { grouped[row.roomId, default: []].append(row) }
        let members = grouped
        let chunkSize = max(256, rows.count / 8 + 1)
        return try await withThrowingTaskGroup(of: Recovered.Rooms.self) { group in
            for start in stride(from: 0, to: rows.count, by: chunkSize) {
                let chunk = rows[start..<min(start + chunkSize, rows.count)]
                group.addTask {
                    var part = Recovered.Rooms()
                    for row in chunk {
                        var room = try RoomState(persistedBytes: row.body)
                        do {
                            room.restore(members: try RoomMembers(rows: members[row.key] ?? []))
                        } catch {
                            throw RoomState.PersistenceError("room \(row.key): \(error)")
                        }
                        let isOld = row.body.first == UInt8(ascii: "{")
                        let body = isOld ? room.persistedBytes() : row.body
                        if let packed = PackedRoom(room, body: body) {
                            part.packed.append(packed)
                        } else {
                            part.live.append(room)
                        }
                        if isOld { part.rewritten.append(EntityRow(kind: row.kind, key: row.key, version: row.version, body: body, updatedAt: row.updatedAt)) }
                    }
                    return part
                }
            }
            var rooms = Recovered.Rooms()
            rooms.packed.reserveCapacity(rows.count)
            for try await part in group { rooms.add(part) }
            return rooms
        }
    }

    public var summaryLine: String {
        "\(rooms.count + packedRooms.count) rooms, \(conversations.count) conversations, \(workouts.count) workouts, \(remembered.count) remembered ids"
    }

    // MARK: Ingest

    /// The two clocks the engine reads (``CoordinatorClock`` in the service makes them).
    ///
    /// `tick` measures every deadline: reorder windows, lock leases, presence grace, the
    /// rate limit, snapshot pacing and throttles. It is monotonic (never stepped by NTP or
    /// an operator) and anchored to the wall clock at start, so it reads like wall time,
    /// and deadlines persisted in the store (lock leases) mean the same after a restart.
    /// `wall` is what goes on the wire and into the store as a time of day: clamped
    /// timestamps, `updatedAt`, an expiry's stamp, the event log's `at`, when an id was
    /// first seen. A wall clock stepped an hour either way then moves those times, never
    /// a deadline.
    public struct Now: Sendable, Equatable {
        public var wall: Millis
        public var tick: Millis

        public init(wall: Millis, tick: Millis) {
            self.wall = wall
            self.tick = tick
        }

        /// One clock for both (tests, tools).
        public init(_ millis: Millis) {
            self.init(wall: millis, tick: millis)
        }
    }

    /// Takes one inbound message at `now`. Returns what can be published at once:
    /// rejections of unreadable input and duplicates (they change nothing, so need no
    /// commit).
    public mutating func ingest(topic: String, payload: [UInt8], at now: Now) -> [Publication] {
        wall = now.wall
        return route(topic: topic, payload: payload, now: now.tick)
    }

    /// ``ingest(topic:payload:at:)`` with one clock for both (tests, benchmarks).
    public mutating func ingest(topic: String, payload: [UInt8], now: Millis) -> [Publication] {
        wall = now
        return route(topic: topic, payload: payload, now: now)
    }

    /// `now` is the tick (deadlines); ``wall`` is set.
    private mutating func route(topic: String, payload: [UInt8], now: Millis) -> [Publication] {
        guard let route = topics.parseInbound(topic) else {
            // Nobody's: counted once, by partition 0.
            guard configuration.partition == 0 else { return [] }
            metrics.messagesIn += 1
            metrics.dropped += 1
            metrics.messagesInByKind[.dropped, default: 0] += 1
            return []
        }
        switch placement(of: route, payload: payload) {
        case .here: break
        case .everywhere:
            guard configuration.partition == 0 else { return dispatch(route, payload: payload, now: now) }
        case .elsewhere:
            metrics.messagesElsewhere += 1
            return []
        }
        metrics.messagesIn += 1
        metrics.messagesInByKind[route.metricsKind, default: 0] += 1
        return dispatch(route, payload: payload, now: now)
    }

    enum Placement { case here, elsewhere, everywhere }

    func placement(of route: Topics.Inbound, payload: [UInt8]) -> Placement {
        Self.placement(of: route, payload: payload, configuration: configuration)
    }

    /// Which partition holds a message (``Partitioning``): its room, its conversation, or
    /// its sender (workouts, queries, a topic or DM command that names nothing else that
    /// can be read). Presence goes to every partition.
    static func placement(of route: Topics.Inbound, payload: [UInt8], configuration: EngineConfiguration) -> Placement {
        let partitioning = configuration.partitioning
        guard partitioning.count > 1 else { return .here }
        let partition: Int
        switch route {
        case .presence:
            return .everywhere
        case .roomEvent(let roomId, _):
            partition = partitioning.partition(ofRoom: roomId)
        case .dmCommand(let user):
            if let command = try? DMCommand.decode(payload) {
                partition = partitioning.partition(ofConversation: user, command.peer)
            } else {
                partition = partitioning.partition(ofUser: user)
            }
        case .workoutControl(let user, _, _), .flight(let user, _, _), .health(let user, _, _),
             .request(let user), .invalid(let user, _, _, _, _):
            partition = partitioning.partition(ofUser: user)
        }
        return partition == configuration.partition ? .here : .elsewhere
    }

    private mutating func dispatch(_ route: Topics.Inbound, payload: [UInt8], now: Millis) -> [Publication] {
        switch route {
        case .roomEvent(let roomId, let user):
            return ingestRoomEvent(roomId: roomId, user: user, payload: payload, now: now)
        case .dmCommand(let user):
            return ingestDMCommand(user: user, payload: payload, now: now)
        case .workoutControl(let user, let workoutId, let device):
            return ingestWorkoutControl(user: user, workoutId: workoutId, device: device, payload: payload, now: now)
        case .flight(let user, let workoutId, let device):
            return ingestFlight(user: user, workoutId: workoutId, device: device, payload: payload, now: now)
        case .health(let user, let workoutId, let device):
            return ingestHealth(user: user, workoutId: workoutId, device: device, payload: payload, now: now)
        case .presence(let user, let clientId):
            if let online = PresenceTracker.parse(payload) {
                presence.update(user: user, clientId: clientId, online: online, now: now)
            }
            return []
        case .request(let user):
            return ingestQuery(user: user, payload: payload, now: now)
        case .invalid(let user, let kind, let reason, let idSource, let workout):
            let version = workout.flatMap { workouts[WorkoutKey(user: user, workoutId: $0)]?.version }
            return [receipt(.rejected(id: idSource.id(of: payload), kind: kind, .invalid(reason), version: version), to: user, arrivedAt: now)]
        }
    }

    /// Queries read the store but change nothing: decoded and rate-limited here like
    /// everything else (a flood of them would hold up everyone's events), answered with
    /// an error response when refused, else handed to the service.
    mutating func ingestQuery(user: String, payload: [UInt8], now: Millis) -> [Publication] {
        let request: ClientRequest
        do throws(DecodeFailure) {
            request = try ClientRequest.decode(payload)
        } catch {
            metrics.queriesRefused += 1
            let kind = (try? JSON.parse(payload))?["type"]?.stringValue
            return [response(ClientRequest.errorResponse(requestId: error.id, kind: kind, error.rejection), to: user)]
        }
        guard takeToken(for: user, now: now) else {
            metrics.queriesRefused += 1
            return [response(ClientRequest.errorResponse(requestId: request.requestId, kind: request.kind.rawValue, Self.rateLimited), to: user)]
        }
        // The changes since a version are in memory: answered here, at once.
        if request.kind == .dmChanges { return [response(dmChangesResponse(request, from: user), to: user)] }
        queries.append(Query(user: user, request: request))
        return []
    }

    /// The queries let in since the last call.
    public mutating func takeQueries() -> [Query] {
        defer { queries = [] }
        return queries
    }

    func response(_ json: JSON, to user: String) -> Publication {
        Publication(topic: topics.responses(user: user), payload: json.serialized())
    }

    /// The common path of buffered events and commands after decoding: duplicate check,
    /// timestamp clamp, into the buffer.
    /// `timestamp`: the item's own, before the clamp. `digestChecked`: the store said that
    /// an id that memory could not judge was not seen (``resolve(_:firstCopy:at:)``).
    mutating func admit(_ item: Buffered, kind: Receipt.Kind, timestamp: Millis, currentVersion: Int64?, now: Millis, digestChecked: Bool = false) -> [Publication] {
        let key = SeenKey(user: item.user, id: item.id)
        switch remembered.lookup(key, timestamp: timestamp) {
        case .exact(let entry):
            if entry.inBuffer {
                remembered.addWaitingCopy(key)
                return []
            }
            return [receipt(.duplicate(id: item.id, kind: kind, version: currentVersion, original: entry.original), to: item.user, arrivedAt: now)]
        case .unsure where !digestChecked:
            metrics.idStoreChecks += 1
            idChecks.append(IdCheck(item: item, kind: kind, timestamp: timestamp, arrival: now))
            return []
        case .unsure, .unseen:
            break
        }
        if !takeToken(for: item.user, now: now) {
            return [receipt(.rejected(id: item.id, kind: kind, Self.rateLimited, version: currentVersion), to: item.user, arrivedAt: now)]
        }
        remembered.admit(key, horizon: RememberedIds.horizon(timestamp: timestamp, wall: wall, retentionMs: configuration.seenIdRetentionMs))
        var item = item
        item.arrival = now
        // Skew is judged against the wall clock: timestamps are times of day.
        let clamped = ReorderBuffer<Buffered>.clamp(timestamp: timestamp, now: wall, maxSkew: configuration.maxSkewMs)
        if clamped != timestamp {
            metrics.clampedTimestamps += 1
            item.setTimestamp(clamped)
        }
        remembered.advanceFrontier(to: clamped)
        _ = buffer.insert(item, timestamp: clamped, userId: item.user, arrival: now)
        return []
    }

    static let rateLimited = Rejection(.rateLimited, "too many events: slow down and resend")

    /// The rate limit: one token per event, command or telemetry sample.
    mutating func takeToken(for user: String, now: Millis) -> Bool {
        guard configuration.rateLimitPerSecond > 0 else { return true }
        if buckets[user] == nil {
            buckets[user] = TokenBucket(ratePerSecond: configuration.rateLimitPerSecond, burst: configuration.rateLimitBurst, now: now)
        }
        return buckets[user]!.takeToken(now: now)
    }

    /// Every receipt the coordinator sends is made here, and counted here: once, by
    /// status and code. `arrivedAt`: when the message it answers was ingested.
    mutating func receipt(_ receipt: Receipt, to user: String, arrivedAt: Millis, target: String? = nil) -> Publication {
        metrics.count(receipt)
        return Publication(
            topic: topics.receipts(user: user), payload: receipt.json.serialized(),
            answers: Publication.Answered(user: user, receipt: receipt, arrivedAt: arrivedAt, target: target))
    }

    // MARK: Step

    /// When ``step(now:)`` next has something to do.
    public var nextDeadline: Millis? {
        var deadline = buffer.nextDeadline
        func consider(_ d: Millis?) {
            guard let d else { return }
            deadline = min(deadline ?? d, d)
        }
        consider(leaseDeadlines.min?.at)
        consider(presence.nextDeadline)
        consider(workoutSnapshotDue.values.min())
        consider(conversationSnapshotDue.values.min())
        consider(republishDue)
        if !pendingBatch.isEmpty { consider(0) }
        // Events held for a restore go as soon as its room is read.
        if !held.isEmpty, pendingRoomLoad == nil { consider(0) }
        return deadline
    }

    /// The store's answer to ``pendingRoomLoad``: the next step applies the held events.
    public mutating func roomLoaded(_ request: RoomVersionRequest, _ load: RoomLoad) {
        guard pendingRoomLoad == request else { return }
        pendingRoomLoad = nil
        roomLoads[request] = load
    }

    /// Applies what the reorder window lets go at `now`, runs expiry and pacing: one batch.
    public mutating func step(at now: Now) -> Step {
        wall = now.wall
        let released = buffer.release(now: now.tick)
        return apply(released, now: now.tick)
    }

    /// ``step(at:)`` with one clock for both (tests, benchmarks).
    public mutating func step(now: Millis) -> Step {
        step(at: Now(now))
    }

    /// Applies everything still waiting without waiting out the window (shutdown).
    public mutating func flush(at now: Now) -> Step {
        wall = now.wall
        let released = buffer.releaseAll()
        return apply(released, now: now.tick)
    }

    public mutating func flush(now: Millis) -> Step {
        flush(at: Now(now))
    }

    mutating func apply(_ released: [Buffered], now: Millis) -> Step {
        var step = Step()
        step.batch = pendingBatch
        pendingBatch = StoreBatch()
        metrics.lateEvents = buffer.lateCount
        var receipts: [Publication] = []
        var changes = BatchChanges(loggedAt: wall)
        // Events held for a restore come first: they were released before these.
        let items = held.isEmpty ? released : held + released
        held = []

        events: for (index, item) in items.enumerated() {
            let receipt: Receipt
            let target: String
            switch item.command {
            case .room(let roomId, let event) where event.type == .restore:
                target = roomId
                guard let restored = applyRestore(event, roomId: roomId, user: item.user, changes: &changes) else {
                    // Its room at that version must be read first: this and everything after
                    // it waits (in order) for the next step.
                    held = Array(items[index...])
                    break events
                }
                receipt = restored
            case .room(let roomId, let event):
                target = roomId
                receipt = applyRoomEvent(event, roomId: roomId, user: item.user, now: now, changes: &changes)
            case .dm(let command):
                target = ConversationKey(item.user, command.peer).description
                receipt = applyDMCommand(command, user: item.user, now: now, changes: &changes, batch: &step.batch)
            case .workout(let workoutId, let device, let control):
                target = WorkoutKey(user: item.user, workoutId: workoutId).description
                receipt = applyWorkoutControl(control, workoutId: workoutId, device: device, user: item.user, now: now, changes: &changes, batch: &step.batch)
            }
            let original = Receipt.Original(receipt)
            let (firstSeen, copies) = remembered.applied(SeenKey(user: item.user, id: item.id), original: original, now: wall)
            step.batch.seenIds.append(SeenId(userId: item.user, id: item.id, kind: receipt.kind, seenAt: firstSeen, original: original))
            step.batch.events.append(EventLogRow(
                at: wall, kind: receipt.kind, userId: item.user, target: target, id: item.id,
                status: receipt.status, code: receipt.code, version: receipt.version, payload: item.payload))
            receipts.append(self.receipt(receipt, to: item.user, arrivedAt: item.arrival, target: target))
            for _ in 0..<copies {
                // Their own arrival is not kept: timed from the first copy's.
                receipts.append(self.receipt(
                    .duplicate(id: item.id, kind: receipt.kind, version: receipt.version, original: original),
                    to: item.user, arrivedAt: item.arrival, target: target))
            }
        }
        metrics.lastBatchSize = items.count - held.count

        expireLocks(now: now, changes: &changes)
        collectWorkoutSnapshots(now: now, changes: &changes)

        publishRooms(changes, into: &step)
        publishConversations(changes.conversations, now: now, into: &step)
        publishWorkouts(changes.workouts, now: now, into: &step)
        step.publications += republishChunk(now: now)
        // Receipts last: by the time a client hears "accepted, version N", snapshot N is out.
        step.publications += receipts
        step.number = afterStep(now: now, batch: &step.batch)
        return step
    }

    /// What one step changed, so each room, conversation and workout is published once.
    struct BatchChanges {
        /// The wall clock of the step: when its room history is logged.
        var loggedAt: Millis
        var rooms: [String: [RoomChange]] = [:]
        var roomOrder: [String] = []
        /// Every room change of the step, as its history keeps it, and the rooms whole
        /// where a checkpoint is due (``RoomHistory``).
        var history: [RoomHistoryRow] = []
        var checkpoints: [RoomCheckpointRow] = []
        /// Rooms whose members changed: their members before the first change.
        var membersBefore: [String: RoomMembers] = [:]
        /// Each changed conversation's accepted commands, in order.
        var conversations: [ConversationKey: ConversationBatch] = [:]
        var workouts: Set<WorkoutKey> = []

        /// `timestamp`: the event's (an expiry's time is its sticker's `updatedAt`).
        mutating func room(_ roomId: String, _ change: RoomChange, timestamp: Millis) {
            if rooms[roomId] == nil { roomOrder.append(roomId) }
            rooms[roomId, default: []].append(change)
            history.append(RoomHistoryRow(roomId: roomId, change: change, timestamp: timestamp, loggedAt: loggedAt))
        }
    }

    // MARK: Snapshots and metrics

    /// Queues every snapshot for republishing (after a start: the broker may have lost
    /// its retained copies). They go out a chunk per step from `now` on.
    public mutating func startRepublishing(now: Millis) {
        republishQueue = everything
        republishIndex = 0
        republishDue = republishQueue.isEmpty ? nil : now
    }

    public var isRepublishing: Bool { republishIndex < republishQueue.count }

    /// The next chunk of republished snapshots, if one is due.
    mutating func republishChunk(now: Millis) -> [Publication] {
        guard let due = republishDue, due <= now else { return [] }
        var out: [Publication] = []
        let end = min(republishQueue.count, republishIndex + Self.republishChunk)
        for item in republishQueue[republishIndex..<end] {
            out += snapshots(of: item)
        }
        republishIndex = end
        if republishIndex >= republishQueue.count {
            republishQueue = []
            republishIndex = 0
            republishDue = nil
        } else {
            republishDue = now + Self.republishPauseMs
        }
        return out
    }

    /// Every snapshot at once (benchmarks; the coordinator republishes in chunks).
    public func allSnapshots() -> [Publication] {
        everything.flatMap(snapshots(of:))
    }

    /// Every room, conversation and workout that has a snapshot.
    var everything: [Republish] {
        rooms.values.filter(\.exists).map { .room($0.roomId) } + packedRooms.keys.map { .room($0) }
            + conversations.values.filter(\.exists).map { .conversation($0.key) }
            + workouts.keys.map { .workout($0) }
    }

    /// The retained snapshot(s) of one room, conversation (both views) or workout, as
    /// it is now.
    func snapshots(of item: Republish) -> [Publication] {
        switch item {
        case .room(let id):
            return roomPublications(id)
        case .conversation(let key):
            return conversations[key].map(conversationSnapshots) ?? []
        case .workout(let key):
            return workouts[key].map { [workoutSnapshot($0)] } ?? []
        }
    }

    /// `coordinator/metrics` of this engine alone (``Metrics/publication(topics:partitions:uptimeSeconds:)``).
    public func metricsPublication(uptimeSeconds: Double) -> Publication {
        Metrics.publication(
            topics: topics, partitions: [Metrics.Partition(partition: configuration.partition, metrics: metrics, gauges: gauges)],
            uptimeSeconds: uptimeSeconds)
    }

    /// The levels beside the counters: buffer depth, republishing left, what is held.
    public var gauges: Metrics.Gauges {
        var g = Metrics.Gauges()
        g.bufferDepth = buffer.count
        g.republishRemaining = republishQueue.count - republishIndex
        g.rooms = rooms.count + packedRooms.count
        g.conversations = conversations.count
        g.workouts = workouts.count
        g.seenIds = remembered.count
        return g
    }
}

/// A workout is named by its user and its id.
struct WorkoutKey: Hashable, CustomStringConvertible {
    var user: String
    var workoutId: String

    /// `user/workoutId`, as the event log's target.
    var description: String { "\(user)/\(workoutId)" }
}

extension Engine.Buffered {
    mutating func setTimestamp(_ timestamp: Millis) {
        switch command {
        case .room(let roomId, var event):
            event.timestamp = timestamp
            command = .room(roomId: roomId, event: event)
        case .dm(var command):
            command.timestamp = timestamp
            self.command = .dm(command)
        case .workout(let workoutId, let device, var control):
            control.timestamp = timestamp
            command = .workout(workoutId: workoutId, device: device, control: control)
        }
    }
}

/// What a partition's MQTT session hands to its pipeline: everything but the messages
/// another partition holds, judged on the session's own thread as the engine would
/// judge them (``Engine`` still places what it gets). With one partition it keeps all.
public struct PartitionFilter: Sendable {
    let configuration: EngineConfiguration
    let topics: Topics

    public init(configuration: EngineConfiguration) {
        self.configuration = configuration
        self.topics = Topics(root: configuration.topicRoot)
    }

    /// False only for a message another partition holds; a topic no partition can place
    /// is kept (partition 0 counts it as dropped, the others ignore it).
    public func keeps(topic: String, payload: [UInt8]) -> Bool {
        guard configuration.partitioning.count > 1, let route = topics.parseInbound(topic) else { return true }
        return Engine.placement(of: route, payload: payload, configuration: configuration) != .elsewhere
    }
}
