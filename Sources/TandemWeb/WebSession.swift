import Logging
import TandemClient
import TandemCore

/// A frame on its way to a page, or the sign that the tab's watched room changed: at
/// that one the socket takes the tab's latest room frame (``Tab/takeRoom(markedBy:)``),
/// so a page that reads slower than the room changes gets the latest room, not every one.
struct OutFrame: Sendable {
    let json: JSON?
    /// The room's mark only: which of the tab's watches queued it (``Tab``'s count of the
    /// rooms it watched), so that a mark left from one room takes no frame of the next.
    let watch: Int

    init(_ json: JSON) {
        self.json = json
        watch = 0
    }

    private init(watch: Int) {
        json = nil
        self.watch = watch
    }

    /// The room watched as the tab's `watch`th changed: its latest frame goes out next.
    static func latestRoom(watch: Int) -> OutFrame { OutFrame(watch: watch) }
}

extension AsyncStream<OutFrame>.Continuation {
    /// Queues `frame`. A tab's queue keeps its newest frames: when it is full the oldest
    /// goes, and if that was the room's mark (at most one is queued, and the room waits
    /// for it) the mark is queued again, so the latest room still goes out.
    func push(_ frame: OutFrame) {
        if case .dropped(let old) = yield(frame), old.json == nil {
            yield(old)
        }
    }
}

/// One signed-in person: their own ``TandemClient`` on their own broker account (so the
/// broker's rules apply to the page exactly as to any app), and the tabs open on it.
///
/// - What every tab shows of the person (their rooms, who is online, their
///   conversations) is followed once here and handed to each tab, the latest first.
/// - Frames from all the person's tabs share one ``TokenBucket``: a session that sends too
///   fast is slowed, never dropped.
/// - The session ends on sign-out, or `tabGrace` after its last tab closed (a reload
///   opens the next one within it); ending closes the MQTT session, so presence says
///   offline, and closes every tab.
public actor WebSession {
    /// The cookie's secret; the store finds the session by it.
    nonisolated let token: String
    public nonisolated let user: String
    public nonisolated let client: TandemClient
    /// The process's room frames, shared by every session (``RoomFrames``).
    nonisolated let roomFrames: RoomFrames
    private let logger: Logger
    private let tabGrace: Duration
    private var pacer: TokenBucket
    private var tabs: [Int: AsyncStream<OutFrame>.Continuation] = [:]
    /// The open tabs themselves, for what concerns each of them (``undoChanged(in:)``).
    private var tabActors: [Int: Tab] = [:]
    private var nextTab = 0
    /// The latest frame of each kind that every tab shows (rooms, presence, conversations).
    private var latest: [String: JSON] = [:]
    private var conversations: [String: ConversationReplica] = [:]
    /// Each workout's latest card (by workout id) and the heart rates of its snapshots.
    private var workouts: [String: (snapshot: WorkoutSnapshot, heartRates: [(Millis, Double)])] = [:]
    /// How many heart rates a card's line keeps (a snapshot a second: two minutes).
    static let heartRatePoints = 120
    /// What the client says that every tab shows (the person's rooms, who is online,
    /// conversations, workouts), taken on this actor in the order it came by a task that
    /// runs only while there is something to take: no task of the session waits on the
    /// client's streams.
    private nonisolated let inbox = Inbox<Input>()

    private enum Input: Sendable {
        case rooms([RoomMembership])
        case online(Set<String>)
        case conversation(ConversationReplica)
        case workout(WorkoutSnapshot)
    }

    private var endTimer: Task<Void, Never>?
    /// The users whose presence is followed (``notePeople(_:from:)``): everyone ever shown.
    private var people: Set<String> = []
    /// Who the session shows now, by where: `room:ID` (that room's members, while the
    /// person is one of them) and `chats` (the conversations' peers). The "presence"
    /// frame lists who of them is online, so someone removed from a room stops seeing
    /// its members there.
    private var shown: [String: Set<String>] = [:]
    /// The latest online users among `people`.
    private var online: Set<String> = []
    private var onEnd: (@Sendable (WebSession) async -> Void)?
    public private(set) var hasEnded = false

    init(token: String, user: String, client: TandemClient, roomFrames: RoomFrames, tabGrace: Duration, pacer: TokenBucket, logger: Logger) {
        self.token = token
        self.roomFrames = roomFrames
        self.user = user
        self.client = client
        self.tabGrace = tabGrace
        self.pacer = pacer
        self.logger = logger
        inbox.attach { [weak self] in
            guard let self else { return }
            Task.detached { await self.takeInputs() }
        }
    }

    /// Follows what every tab shows, then connects. Throws what ``TandemClient/connect(timeout:)``
    /// throws (refused credentials, an unreachable broker); the client is closed then.
    func start(timeout: Duration, onEnd: @escaping @Sendable (WebSession) async -> Void) async throws {
        self.onEnd = onEnd
        let inbox = inbox
        do {
            try await client.myRooms { inbox.put(.rooms($0)) }
            // Presence of the people this session shows (themselves, their rooms'
            // members, their chat peers: ``notePeople(_:from:)``), not of everyone: with
            // everyone's, each sign-in would reach every session of the process.
            try await client.onlineUsers(among: [user]) { inbox.put(.online($0)) }
            try await client.conversations { inbox.put(.conversation($0)) }
            try await client.allWorkoutSnapshots { inbox.put(.workout($0)) }
            try await client.connect(timeout: timeout)
        } catch {
            inbox.close()
            await client.close()
            throw error
        }
        // Nobody may open a tab after signing in: the grace runs from now.
        scheduleEnd()
    }

    /// The people the page shows from `source` (`room:ID`: a room's members; `chats`:
    /// the chats' peers), replacing what it showed before: their presence is followed,
    /// and the "presence" frame lists who of everyone shown is online.
    func notePeople(_ users: some Sequence<String>, from source: String) async {
        let users = Set(users)
        guard !hasEnded, shown[source] != users else { return }
        shown[source] = users
        sharePresence()
        let new = users.subtracting(people)
        guard !new.isEmpty else { return }
        people.formUnion(new)
        do {
            try await client.followPresence(of: new)
        } catch {
            logger.info("cannot follow presence", metadata: ["users": "\(new.sorted())", "error": "\(error)"])
        }
    }

    /// Takes what the inbox holds, in the order it came, until it is empty.
    private func takeInputs() async {
        await inbox.drain { input in
            switch input {
            case .rooms(let list): receive(rooms: list)
            case .online(let users): receive(online: users)
            case .conversation(let replica): await receive(replica)
            case .workout(let snapshot): receive(snapshot)
            }
        }
    }

    private func receive(rooms list: [RoomMembership]) {
        share("rooms", PageJSON.rooms(list))
        // A room the person left or was removed from no longer shows its members.
        let current = Set(list.map { "room:\($0.roomId)" })
        let gone = shown.keys.filter { $0.hasPrefix("room:") && !current.contains($0) }
        guard !gone.isEmpty else { return }
        for source in gone { shown[source] = nil }
        sharePresence()
    }

    private func receive(online users: Set<String>) {
        online = users
        sharePresence()
    }

    private func sharePresence() {
        var visible: Set<String> = [user]
        for users in shown.values { visible.formUnion(users) }
        let frame = PageJSON.presence(online.intersection(visible))
        guard latest["presence"] != frame else { return }
        share("presence", frame)
    }

    private func receive(_ replica: ConversationReplica) async {
        if conversations[replica.peer] == nil { await notePeople(Set(conversations.keys).union([replica.peer]), from: "chats") }
        conversations[replica.peer] = replica
        share("conversations", PageJSON.conversations(conversations.values.sorted { $0.updatedAt > $1.updatedAt }))
    }

    private func receive(_ snapshot: WorkoutSnapshot) {
        var heartRates = workouts[snapshot.workoutId].flatMap { $0.snapshot.epoch == snapshot.epoch ? $0.heartRates : nil } ?? []
        if let health = snapshot.health, health.timestamp > (heartRates.last?.0 ?? .min) {
            heartRates.append((health.timestamp, health.heartRate))
            if heartRates.count > Self.heartRatePoints { heartRates.removeFirst(heartRates.count - Self.heartRatePoints) }
        }
        workouts[snapshot.workoutId] = (snapshot, heartRates)
        let frame = PageJSON.workout(snapshot, heartRates: heartRates)
        for continuation in tabs.values { continuation.push(OutFrame(frame)) }
    }

    private func share(_ kind: String, _ frame: JSON) {
        latest[kind] = frame
        for continuation in tabs.values { continuation.push(OutFrame(frame)) }
    }

    /// A new tab: its id and the frames it is to send the page, starting with what is
    /// held. Nil when the session has ended.
    func attach() -> (id: Int, frames: AsyncStream<OutFrame>, continuation: AsyncStream<OutFrame>.Continuation)? {
        guard !hasEnded else { return nil }
        endTimer?.cancel()
        endTimer = nil
        nextTab += 1
        // A page that does not read loses the oldest frames first: every frame but a
        // receipt is a whole state, so the next one of its kind makes up for it.
        let (frames, continuation) = AsyncStream<OutFrame>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        tabs[nextTab] = continuation
        continuation.push(OutFrame(PageJSON.hello(user: user)))
        for kind in ["rooms", "presence", "conversations"] {
            if let frame = latest[kind] { continuation.push(OutFrame(frame)) }
        }
        for card in workouts.values.sorted(by: { $0.snapshot.startedAt < $1.snapshot.startedAt }) {
            continuation.push(OutFrame(PageJSON.workout(card.snapshot, heartRates: card.heartRates)))
        }
        return (nextTab, frames, continuation)
    }

    /// The tab that took ``attach()``'s stream, once it runs.
    func register(_ tab: Tab) {
        guard tabs[tab.id] != nil else { return }
        tabActors[tab.id] = tab
    }

    /// An undo or redo in `room` is done: what the person can undo and redo there changed
    /// for every tab of theirs (the stacks are the person's), so each tab showing the
    /// room sends it again.
    func undoChanged(in room: String) async {
        for tab in tabActors.values { await tab.refreshRoom(room) }
    }

    /// A tab closed; the last one starts the grace.
    func detach(_ id: Int) {
        tabActors[id] = nil
        tabs.removeValue(forKey: id)?.finish()
        if tabs.isEmpty, !hasEnded { scheduleEnd() }
    }

    var tabCount: Int { tabs.count }

    private func scheduleEnd() {
        endTimer?.cancel()
        let grace = tabGrace
        endTimer = Task.detached { [weak self] in
            do { try await Task.sleep(for: grace) } catch { return }
            await self?.endIfIdle()
        }
    }

    private func endIfIdle() async {
        guard tabs.isEmpty, !hasEnded else { return }
        logger.info("\(user): no tab open for \(tabGrace); ending the session")
        // This runs in the timer's own task: end() must not cancel it (its MQTT session
        // would close without saying offline).
        endTimer = nil
        await end()
    }

    /// How long the next frame from any tab waits (milliseconds; 0: at once).
    func reserveFrame() -> Millis {
        pacer.reserve(now: WallClock.now())
    }

    /// Ends the session: every tab is told and closed, the MQTT session is closed
    /// (presence says offline), the store forgets it.
    func end() async {
        guard !hasEnded else { return }
        hasEnded = true
        endTimer?.cancel()
        endTimer = nil
        inbox.close()
        for continuation in tabs.values {
            continuation.push(OutFrame(PageJSON.signedOut))
            continuation.finish()
        }
        tabs.removeAll()
        tabActors.removeAll()
        // The store forgets it first: once anyone can see it offline, its cookie is no
        // longer a session (theLastTabClosingEndsTheSession raced the other way).
        await onEnd?(self)
        onEnd = nil
        // Not cancelled with whoever ended it (a sign-out whose browser went away): the
        // offline presence is published before the MQTT session closes.
        let client = client
        await Task { await client.close() }.value
    }
}
