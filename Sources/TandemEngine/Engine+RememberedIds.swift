import TandemCore

/// Remembered ids (``RememberedIds``): the entry kept for each recent one, the check an
/// older one's resend needs from the store, and the upkeep after every step.
extension Engine {
    struct SeenKey: Hashable {
        var user: String
        var id: String
    }

    /// When an id was first seen and, once applied, what its first copy got. There is
    /// one per remembered id (a million after a busy day), so it is packed into 24
    /// bytes rather than nesting optionals.
    struct SeenEntry {
        var at: Millis
        /// The first copy's version; `Int64.min`: none.
        private var version = Int64.min
        /// 0: not applied yet (or unknown), 1: accepted, 2: rejected.
        private var status: UInt8 = 0
        /// Index in `ReceiptCode.allCases`; `UInt8.max`: none.
        private var code = UInt8.max
        /// Copies that arrived while the first still waited in the reorder buffer: they
        /// are answered when it is applied, so that their receipts can say its outcome.
        var waitingCopies: UInt16 = 0
        var inBuffer = false

        init(at: Millis, original: Receipt.Original? = nil, inBuffer: Bool = false) {
            self.at = at
            self.inBuffer = inBuffer
            self.original = original
        }

        var original: Receipt.Original? {
            get {
                guard status != 0 else { return nil }
                return Receipt.Original(
                    status: status == 1 ? .accepted : .rejected,
                    code: code == .max ? nil : SeenEntry.codes[Int(code)],
                    version: version == .min ? nil : version)
            }
            set {
                guard let newValue else {
                    status = 0
                    return
                }
                status = newValue.status == .rejected ? 2 : 1
                code = newValue.code.flatMap { c in SeenEntry.codes.firstIndex(of: c).map(UInt8.init) } ?? .max
                version = newValue.version ?? .min
            }
        }

        static let codes = ReceiptCode.allCases
    }

    /// An event or command whose id memory cannot judge (``RememberedIds/Lookup/unsure``):
    /// remembered only as a digest (probably a resend of an older one, or about once in
    /// billions a new id with the same digest), or not held and with a timestamp older
    /// than the memory window (a resend from minutes ago, or a client whose clock is
    /// behind). The service asks the store (``CoordinatorStore/seenId(user:id:)``) off
    /// the pipeline and hands the answer to ``resolve(_:firstCopy:at:)``: a resend is
    /// rare, so this path may take a query's time; the pipeline never waits for it.
    public struct IdCheck: Sendable {
        let item: Buffered
        let kind: Receipt.Kind
        let timestamp: Millis
        /// When it was ingested.
        let arrival: Millis

        public var user: String { item.user }
        public var id: String { item.id }
    }

    /// The checks for the store made since the last call.
    public mutating func takeIdChecks() -> [IdCheck] {
        defer { idChecks = [] }
        return idChecks
    }

    /// Answers a check with what the store holds: seen, a `duplicate` receipt with the
    /// first copy's outcome and the current version; not seen, the event goes on as a
    /// new one (rate limit, reorder buffer).
    public mutating func resolve(_ check: IdCheck, firstCopy: SeenId?, at now: Now) -> [Publication] {
        wall = now.wall
        let version = currentVersion(of: check.item)
        guard let firstCopy else {
            return admit(check.item, kind: check.kind, timestamp: check.timestamp, currentVersion: version, now: now.tick, digestChecked: true)
        }
        return [receipt(.duplicate(id: check.id, kind: check.kind, version: version, original: firstCopy.original),
                        to: check.user, arrivedAt: check.arrival)]
    }

    /// The version a receipt about `item` carries when it is not applied: its room's,
    /// conversation's or workout's current one.
    func currentVersion(of item: Buffered) -> Int64? {
        switch item.command {
        case .room(let roomId, _): roomVersion(roomId)
        case .dm(let command): conversationVersion(item.user, command.peer)
        case .workout(let workoutId, _, _): workouts[WorkoutKey(user: item.user, workoutId: workoutId)]?.version
        }
    }

    /// The store holds everything steps up to `number` (``Step/number``) persisted: their
    /// ids may be kept as digests only. Call it after each step's commit, in order (a
    /// step with an empty batch counts too, when its publications go out).
    public mutating func committed(through number: Int) {
        remembered.committed(through: number)
    }

    /// After each step: folds and forgets remembered ids when due, and with each pruning
    /// pass packs rooms that have been idle (``packIdleRooms(now:)``). The store forgets
    /// expired ids with every batch that remembers some, twice as many as it remembers
    /// (at least ``forgetAtLeast``), and with every pruning pass; and expired event-log
    /// rows the same way (``CoordinatorConfiguration/eventLogRetentionMs``). Returns the
    /// step's number.
    mutating func afterStep(now: Millis, batch: inout StoreBatch) -> Int {
        let (number, pruned) = remembered.stepApplied(
            now: now, wall: wall, retentionMs: configuration.seenIdRetentionMs, memoryMs: configuration.seenIdWindowMs)
        if pruned {
            buckets = buckets.filter { !$0.value.isFull(now: now) }
            // A room's `updatedAt` is a time of day.
            packIdleRooms(now: wall)
        }
        if pruned || !batch.seenIds.isEmpty {
            // `seen_at` is a time of day.
            batch.forgetSeenIds = ForgetSeenIds(
                before: wall - configuration.seenIdRetentionMs, limit: max(Self.forgetAtLeast, 2 * batch.seenIds.count))
        }
        // The event log likewise: with every batch that logs events, about twice as many
        // rows as it logs (so a backlog shrinks), and with every pruning pass.
        if let retention = configuration.eventLogRetentionMs, pruned || !batch.events.isEmpty {
            batch.forgetEvents = ForgetEvents(before: wall - retention, limit: max(Self.forgetAtLeast, 2 * batch.events.count))
        }
        // Room history goes with the event log's retention, looked at once a minute (each
        // look reads every room's checkpoints from before the cutoff).
        // (with a batch that commits anyway: never a commit of its own).
        if let retention = configuration.eventLogRetentionMs, !batch.isEmpty, wall - lastHistoryForget >= Self.historyForgetIntervalMs {
            lastHistoryForget = wall
            batch.forgetHistory = ForgetHistory(before: wall - retention, limit: Self.historyForgetLimit)
        }
        return number
    }

    static let forgetAtLeast = 200
    static let historyForgetIntervalMs: Millis = 60_000
    static let historyForgetLimit = 20_000
}
