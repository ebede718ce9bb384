import Logging
import TandemCore

/// What an app needs to take part in Tandem: presence, rooms, conversations and
/// workouts, with receipts, resends and replicas handled for it.
///
/// ```swift
/// let transport = try MosquittoTransport(host: "127.0.0.1", port: 1883, username: "alice",
///                                        password: "alice-demo", user: "alice", clientId: "alice-phone")
/// let client = TandemClient(transport: transport, user: "alice", clientId: "alice-phone")
/// try await client.connect()
/// let room = try await client.room("q1")
/// let receipt = try await client.edit(.create, sticker: "s1", in: "q1", image: "a.png",
///                                     frame: Frame(x: 0, y: 0, width: 10, height: 10))
/// for await replica in room { show(replica.visibleStickers) }
/// ```
///
/// Every event and command is sent at least once: it stays pending under its id, is
/// resent under the same id after `resendAfter` without a receipt and after every
/// reconnect, and the call that sent it returns the receipt (``send(id:topic:payload:label:)``),
/// or it comes on ``receipts()`` (``post(id:topic:payload:label:)``). The coordinator
/// deduplicates by id, so a resend is never applied twice.
///
/// Watch what you need before ``connect(timeout:)`` (``room(_:)``, ``conversations()``,
/// ``workout(_:)``, ``coordinatorStatus()``...) and the retained state arrives with the
/// connection; watching later works too. ``close()`` says offline and ends every stream.
public actor TandemClient {
    /// The contract's presence payloads.
    public static let online = JSON.obj(["online": true]).serialized()
    public static let offline = JSON.obj(["online": false]).serialized()

    public nonisolated let user: String
    public nonisolated let clientId: String
    public nonisolated let topics: Topics
    /// Where this client says it is online; the transport's will says offline there.
    public nonisolated var presenceTopic: String { topics.presence(user: user, clientId: clientId) }
    /// Flight samples closer together than this are not published (the contract's
    /// default throttle is 3 s).
    public nonisolated let flightInterval: Millis

    nonisolated let transport: any TandemTransport
    /// The transport, when it delivers to closures (``DeliveringTransport``): asked once,
    /// not with a dynamic cast for every change that arrives.
    nonisolated let delivering: (any DeliveringTransport)?
    let logger: Logger
    var ids: IdentifierGenerator
    /// What was sent and waits for its receipt.
    var tracker: PendingTracker
    /// Callers of `send` waiting for a receipt, by id.
    var waiters: [String: CheckedContinuation<Receipt, any Error>] = [:]
    var receiptListeners = Broadcast<ReceiptEvent>(buffering: .unbounded)
    var connectionListeners = Broadcast<ConnectionChange>(buffering: .unbounded)
    var coordinator: Broadcast<CoordinatorStatus>?
    var rooms: [String: RoomWatch] = [:]
    /// This user's rooms as its retained room list says (nil: not followed yet).
    var memberships: [String: RoomMembership] = [:]
    var membershipListeners: Broadcast<[RoomMembership]>?
    /// The room of each edit sent and not yet settled, so its receipt reaches the room's
    /// watchers even after a new epoch dropped it from the replica.
    var roomOfEdit: [String: String] = [:]
    var conversations: [String: ConversationWatch] = [:]
    /// Listeners to every conversation of this user (nil: not watched).
    var allConversations: Broadcast<ConversationReplica>?
    var workouts: [String: Broadcast<WorkoutSnapshot>] = [:]
    /// Listeners to every workout of this user (nil: not followed), and the latest
    /// snapshot of each.
    var allWorkouts: Broadcast<WorkoutSnapshot>?
    var latestWorkouts: [String: WorkoutSnapshot] = [:]
    /// The timestamp of the last flight sample published, by workout and device.
    var lastFlight: [String: Millis] = [:]
    /// Who is online, by user and client id, from the retained presence topics (nil:
    /// not followed yet), and the listeners to it.
    var presenceClients: [String: [String: Bool]] = [:]
    var presenceListeners: Broadcast<Set<String>>?
    /// Whose presence is followed: everyone's (`presence/+/+`), or only these users'
    /// (`presence/{user}/+` each, ``onlineUsers(among:)``).
    var presenceFollowed = PresenceFollowed.only([])
    enum PresenceFollowed { case everyone, only(Set<String>) }
    /// This client's undo and redo in each room (edits made while the room was watched),
    /// and the last undo or redo asked for in each: the next one waits for it.
    var undoHistories: [String: UndoHistory] = [:]
    var undoQueue: [String: Task<Void, Never>] = [:]
    /// Restores sent and waiting for their receipt: an accepted one clears the room's
    /// undo and redo.
    var pendingRestores: Set<String> = []
    /// Undos and redos waiting for the edits sent before them in a room to be settled,
    /// by room and token.
    var settleWaiters: [String: [Int: CheckedContinuation<Void, Never>]] = [:]
    var lastWaiterToken = 0
    /// The pace of this client's cursor in each room, and the flush each waits for.
    var cursorThrottles: [String: CursorThrottle] = [:]
    var cursorFlushes: [String: Task<Void, Never>] = [:]
    /// The other members' cursors of each room followed with ``cursors(room:)``.
    var cursorWatches: [String: CursorWatch] = [:]
    /// Rooms whose cursors topic is subscribed (it stays so until ``close()``).
    var cursorsSubscribed: Set<String> = []
    /// Rooms whose `state` and `changes` this client subscribed to: a subscription lasts
    /// as long as the client, so a room watched again (after the user left it and came
    /// back) is not subscribed twice.
    var roomsSubscribed: Set<String> = []
    /// The origin of the monotonic clock the cursor throttles count on.
    let clockOrigin = ContinuousClock.now
    var queries: [String: QuerySlot] = [:]
    /// `users/{user}/responses` is subscribed (from the first query on).
    var followingResponses = false
    /// Tasks that read a transport's streams for the inbox (a transport that does not
    /// deliver, ``DeliveringTransport``), and those of ``mirroredFlights(workout:origin:)``
    /// and ``healthSamples(workout:)``: cancelled at ``close()``.
    var tasks: [Task<Void, Never>] = []
    /// Every subscription's messages, the connection's edges and the resend clock's
    /// ticks, taken on this actor in the order they came, by a task that runs only while
    /// there is something to take (``Inbox``).
    nonisolated let inbox = Inbox<ClientInput>()
    /// The connection as the inbox's events said it: up once, and dropped since (from the
    /// first connection on, each outage is reported once).
    var eventsUp = false
    var eventsDropped = false
    /// The process's resend clock ticks into the inbox (something waits for its receipt).
    var resendArmed = false
    /// Receipts, connection events and resends are followed (from the first `connect`).
    var following = false
    var connected = false
    /// ``close()`` was called.
    var isClosed = false
    /// Room snapshots read (every one the broker delivered, held room or not): what
    /// pausing the snapshot topics saves shows here (``RoomWatch``).
    package internal(set) var roomSnapshotsRead = 0
    /// Room snapshots and changes decoded once per process (nil: decoded here).
    let sharedDecodes: SharedDecodes?

    /// A watched room. Over a ``DeliveringTransport`` its snapshot topic is paused while
    /// the room is busy and its changes follow on: each RoomChanges is published before
    /// the snapshot of the same batch, so a replica that applied the changes has nothing
    /// to learn from that snapshot (in a room of five, each drag reached tandem-web's five
    /// sessions twice). The topic is subscribed again, and the broker sends the retained
    /// snapshot:
    /// - on changes that do not follow on (a gap, a new epoch): the contract's "on a gap
    ///   it takes the next snapshot"; it stays subscribed until a snapshot reaches them;
    /// - when the room has been quiet for ``roomQuietAfter`` (on the resend clock's tick:
    ///   2 to 3 s): a change lost on the way (a
    ///   QoS 0 message the broker dropped, a batch whose RoomChanges never left because
    ///   the coordinator died between its commit and its publish, republished as a
    ///   snapshot by the next term) shows then, with no later change needed to reveal it;
    /// - after a drop: the reconnect subscribes every topic again (the rooms that were
    ///   paused are paused again once it is up: the retained snapshot still comes);
    /// - when the room is watched again (the user left it and came back): the
    ///   subscription from the first watch is resumed.
    /// Only changes applied in step pause it (two within ``roomQuietAfter``): a snapshot,
    /// retained or not, never does, since the one the broker holds may be older than a
    /// change it has not seen yet.
    ///
    /// A class: reading a room's replica or flags out of ``rooms`` copies a reference,
    /// not the replica, two broadcasts and the flags (every change read did, twice).
    final class RoomWatch {
        /// Changed only through ``change(_:)``.
        private(set) var replica: RoomReplica
        var replicas = Broadcast<RoomReplica>()
        /// Every new listener starts from the room as held (``initialUpdate(of:)``): no
        /// latest update kept.
        var updates = Broadcast<RoomUpdate>(buffering: .unbounded, keepsLatest: false)
        /// The snapshot topic is paused at the broker (as far as this client knows: after
        /// a drop, the reconnect subscribes it again).
        var snapshotsPaused = false
        /// After a gap: the snapshot it asked for. The topic stays subscribed until a
        /// snapshot brings the replica there (the retained one the broker sends at once
        /// may be older); asked again when none has for ``roomQuietAfter`` (a QoS 0
        /// snapshot can be dropped too), at most ``snapshotAsks`` times.
        var snapshotWanted: SnapshotAsk?

        struct SnapshotAsk {
            /// The epoch and version the changes that did not follow on reached.
            var epoch: String
            var version: Int64
            /// When it was last asked for, and how many times.
            var askedAt: ContinuousClock.Instant
            var asks = 1
        }
        /// When a change was last applied in step.
        var lastChangeAt: ContinuousClock.Instant?

        init(replica: RoomReplica) {
            self.replica = replica
        }

        /// Changes the replica in place (``Broadcast/change(_:_:)``: not a copy of every
        /// sticker, which the replica kept for later listeners would otherwise cost).
        func change<Result>(_ body: (inout RoomReplica) -> Result) -> Result {
            replicas.change(&replica, body)
        }
    }

    /// How long a room whose snapshots are paused may go without a change before its
    /// retained snapshot is read again (``RoomWatch``).
    static let roomQuietAfter: Duration = .seconds(2)
    /// How many times a gap asks for the snapshot before it stops asking (the topic stays
    /// subscribed: the next snapshot published comes anyway).
    static let snapshotAsks = 5

    struct CursorWatch {
        var listeners = Broadcast<RoomCursor>(buffering: .bufferingNewest(256))
        /// Each member's last position (members whose pointer left are not in it).
        var latest: [String: CursorPosition] = [:]
    }

    struct ConversationWatch {
        /// Changed only through ``change(_:)``.
        private(set) var replica: ConversationReplica
        var replicas = Broadcast<ConversationReplica>()
        /// Set when changes left a gap: the version the view must reach to be current.
        var behindUntil: Int64?
        /// A `dmChanges` request for this conversation is on its way.
        var catchingUp = false

        init(replica: ConversationReplica) {
            self.replica = replica
        }

        /// Changes the replica in place (``Broadcast/change(_:_:)``: not a copy of every
        /// message before a new one).
        mutating func change<Result>(_ body: (inout ConversationReplica) -> Result) -> Result {
            replicas.change(&replica, body)
        }
    }

    /// A query waiting for its response, or a response that came before anyone waited.
    enum QuerySlot {
        case waiting(CheckedContinuation<JSON, any Error>?)
        case answered(JSON)
    }

    /// - Parameters:
    ///   - transport: how to reach the broker; its will must say offline on
    ///     ``presenceTopic`` (``MosquittoTransport`` sets it).
    ///   - user: the userId this client acts as (the MQTT username under the demo ACL).
    ///   - clientId: stable per user and device ("alice-phone"), so the broker keeps one
    ///     presence entry per live client.
    ///   - resendAfter: milliseconds without a receipt before a resend.
    ///   - flightInterval: the least time between two flight samples published.
    ///   - logger: where the client says what it does (resends, unreadable messages).
    ///   - sharedDecodes: room snapshots and changes decoded once for every client of the
    ///     process that shares it (a server holding a client per person); nil: this
    ///     client decodes what it reads.
    public init(
        transport: any TandemTransport, user: String, clientId: String, topics: Topics = Topics(),
        resendAfter: Millis = 5_000, flightInterval: Millis = 3_000, logger: Logger = Logger(label: "tandem.client"),
        sharedDecodes: SharedDecodes? = nil
    ) {
        self.sharedDecodes = sharedDecodes
        self.transport = transport
        delivering = transport as? any DeliveringTransport
        self.user = user
        self.clientId = clientId
        self.topics = topics
        self.flightInterval = flightInterval
        self.logger = logger
        tracker = PendingTracker(resendAfter: resendAfter)
        ids = IdentifierGenerator(user: user)
        inbox.attach { [weak self] in
            guard let self else { return }
            // Detached: no task-local values copied into it.
            Task.detached { await self.takeInputs() }
        }
    }

    // MARK: Connection and presence

    /// Subscribes to this user's receipts, connects, and says online. After a reconnect
    /// it says online again and resends everything pending.
    ///
    /// - Parameter timeout: nil waits as long as it takes (the transport keeps
    ///   retrying); otherwise a broker not reached in time throws
    ///   ``TandemClientError/unreachable(problem:timeout:)``.
    /// - Throws: ``TandemClientError/connectFailed(reason:)`` when the transport gives up
    ///   for good (credentials refused, a certificate that does not verify).
    public func connect(timeout: Duration? = nil) async throws {
        guard !connected else { return }
        if !following { try await startFollowing() }
        do {
            if let timeout {
                try await Self.connect(transport, within: timeout)
            } else {
                try await transport.connect()
            }
        } catch let error as TandemClientError {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch {
            throw TandemClientError.connectFailed(reason: "\(error)")
        }
        try await transport.publish(presenceTopic, payload: Self.online, retain: true)
        connected = true
        logger.debug("connected as \(clientId)")
    }

    private static func connect(_ transport: any TandemTransport, within timeout: Duration) async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { try await transport.connect(); return true }
            group.addTask { try await Task.sleep(for: timeout); return false }
            let reached = try await group.next() ?? false
            group.cancelAll()
            guard reached else { throw TandemClientError.unreachable(problem: transport.lastProblem, timeout: timeout) }
        }
    }

    /// Receipts, the connection's edges and resends, from the first connect on.
    private func startFollowing() async throws {
        try await follow([topics.receipts(user: user)]) { client, message in
            client.receive(receiptMessage: message)
        }
        let inbox = inbox
        if let transport = delivering {
            transport.followEvents { inbox.put(.event($0)) }
        } else {
            let events = transport.events
            tasks.append(Task {
                for await event in events { inbox.put(.event(event)) }
            })
        }
        following = true
        armResends()
    }

    /// Takes what the inbox holds, in the order it came, until it is empty (the task
    /// that calls this then ends).
    func takeInputs() {
        while true {
            let inputs = inbox.take()
            if inputs.isEmpty { return }
            for input in inputs {
                switch input {
                case .message(let message, let receive): receive(self, message)
                case .event(let event): take(event)
                case .resendTick:
                    resendDue()
                    resumeQuietRooms()
                }
            }
        }
    }

    /// What happens before the first connection is connect()'s business (it throws or
    /// waits); from then on, each outage is reported once.
    private func take(_ event: TransportEvent) {
        switch event {
        case .connected:
            if !eventsUp {
                eventsUp = true
            } else if eventsDropped {
                eventsDropped = false
                reconnected()
            }
        case .disconnected(let reason):
            guard eventsUp, !eventsDropped else { return }
            eventsDropped = true
            lost(reason)
        }
    }

    /// The resend clock ticks for this client while something waits for its receipt or
    /// a room's snapshots are paused (from the first connect on, until ``close()``).
    func armResends() {
        let armed = following && !isClosed
            && (!tracker.isEmpty || rooms.values.contains { $0.snapshotsPaused || $0.snapshotWanted != nil })
        guard armed != resendArmed else { return }
        resendArmed = armed
        if armed { ResendClock.shared.arm(inbox) } else { ResendClock.shared.disarm(inbox) }
    }

    private func lost(_ reason: String) {
        logger.warning("disconnected: \(reason)")
        connectionListeners.send(.lost(reason: reason))
    }

    private func reconnected() {
        logger.notice("reconnected; resending what is pending")
        try? transport.enqueue(presenceTopic, payload: Self.online, retain: true)
        for outgoing in tracker.resendAll(at: WallClock.now()) { publish(outgoing) }
        // The reconnect subscribed every topic again (a clean session), and each room's
        // retained snapshot is already on its way (this edge comes after the SUBACKs):
        // the rooms that were paused are paused again, on this connection. (A pause
        // sent on it before this edge was taken is sent once more: harmless.)
        if let transport = delivering {
            for (id, watch) in rooms where watch.snapshotsPaused { transport.pauseSubscription(topics.roomState(room: id)) }
        }
        connectionListeners.send(.restored)
    }

    /// Why the last connection attempt failed, as the transport says it (nil: nothing
    /// failed, or the last attempt reached the port and waits for the broker's
    /// answer), for telling a person why the broker is not reached yet.
    public nonisolated var lastProblem: String? { transport.lastProblem }

    /// The connection's edges from the first ``connect(timeout:)`` on: ``ConnectionChange/lost(reason:)``
    /// once when it drops, ``ConnectionChange/restored`` when it is back. Ends at ``close()``.
    public func connectionChanges() -> AsyncStream<ConnectionChange> {
        connectionListeners.listen(first: [])
    }

    /// The coordinator's status: the retained one first, then each change (it goes
    /// offline when it stops or vanishes, online when it is back). An app says so,
    /// since meanwhile nothing gets a receipt.
    public func coordinatorStatus() async throws -> AsyncStream<CoordinatorStatus> {
        if coordinator == nil {
            coordinator = Broadcast()
            try await follow([topics.coordinatorStatus]) { client, message in
                guard let status = CoordinatorStatus.decode(message.payload), client.coordinator?.current != status else { return }
                client.coordinator?.send(status)
            }
        }
        return coordinator!.listen()
    }

    /// Says offline, clears the retained presence (so the broker keeps nothing for a
    /// client that left cleanly), disconnects, fails every wait and ends every stream.
    /// The offline message goes first because the coordinator ignores an empty presence
    /// payload: it learns "offline", then the broker forgets the topic. (After a crash
    /// the will's retained offline stays, which is what tells the coordinator.)
    public func close() async {
        inbox.close()
        for task in tasks { task.cancel() }
        tasks.removeAll()
        for (_, flush) in cursorFlushes { flush.cancel() }
        cursorFlushes.removeAll()
        let shownCursors = cursorThrottles.filter(\.value.shown).map(\.key)
        cursorThrottles.removeAll()
        if transport.isConnected {
            // Where this client's pointer was shown, it leaves.
            for room in shownCursors {
                try? transport.enqueueAtMostOnce(topics.roomCursor(room: room, user: user), payload: CursorPosition.payload(nil))
            }
            try? await transport.publish(presenceTopic, payload: Self.offline, retain: true)
            try? await transport.publish(presenceTopic, payload: [], retain: true)
        }
        await transport.disconnect()
        connected = false
        for (_, waiter) in waiters { waiter.resume(throwing: TandemClientError.closed) }
        waiters.removeAll()
        for case (_, .waiting(let waiter?)) in queries { waiter.resume(throwing: TandemClientError.closed) }
        queries.removeAll()
        isClosed = true
        for (_, waiters) in settleWaiters {
            for (_, waiter) in waiters { waiter.resume() }
        }
        settleWaiters.removeAll()
        armResends()
        receiptListeners.finish()
        connectionListeners.finish()
        coordinator?.finish()
        for key in rooms.keys {
            rooms[key]?.replicas.finish()
            rooms[key]?.updates.finish()
        }
        for key in conversations.keys { conversations[key]?.replicas.finish() }
        allConversations?.finish()
        for key in cursorWatches.keys { cursorWatches[key]?.listeners.finish() }
        cursorWatches.removeAll()
        for key in workouts.keys { workouts[key]?.finish() }
        allWorkouts?.finish()
        presenceListeners?.finish()
    }

    /// A fresh event or command id, unique for this client.
    public func nextId() -> String { ids.next() }

    /// The payload of `message` read with `decode`; nil, and a warning naming `what`,
    /// when it is unreadable.
    func read<Value>(_ what: String, _ message: TransportMessage, _ decode: ([UInt8]) throws(Rejection) -> Value) -> Value? {
        do {
            return try decode(message.payload)
        } catch {
            logger.warning("unreadable \(what) on \(message.topic): \(error)")
            return nil
        }
    }

    /// Subscribes to `filters` and hands each message to `receive` on this actor until
    /// the client closes, through the inbox.
    func follow(_ filters: [String], _ receive: @escaping @Sendable (isolated TandemClient, TransportMessage) -> Void) async throws {
        let inbox = inbox
        if let transport = delivering {
            try await transport.subscribe(filters) { message in inbox.put(.message(message, receive)) }
            return
        }
        let stream = try await transport.subscribe(filters)
        tasks.append(Task {
            do {
                for try await message in stream { inbox.put(.message(message, receive)) }
            } catch {}
        })
    }
}
