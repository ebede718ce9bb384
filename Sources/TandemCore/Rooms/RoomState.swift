/// One room's stickers and locks: the coordinator's source of truth, a pure value.
///
/// `apply` implements the contract's Rooms rules. Every operation is O(1) or O(log n)
/// (amortised) in the number of stickers: a dictionary maps each id to its slot in
/// creation order, a deleted sticker leaves a hole that is squeezed out once holes make
/// up half the slots, and lock deadlines sit in a min-heap with lazy removal.
public struct RoomState: Sendable {
    public let roomId: String
    /// 0 while the room does not exist; its first accepted event makes it 1.
    public private(set) var version: Int64 = 0
    /// The timestamp of the last change (the coordinator's clock for an expiry).
    public private(set) var updatedAt: Millis = 0
    /// Ids that were deleted; they can never be created again.
    public private(set) var tombstones: Set<String> = []
    /// The lock lease deadline of every owned sticker, by sticker id.
    public private(set) var leaseDeadlines: [String: Millis] = [:]

    /// Stickers in creation order; nil where one was deleted, until the next compaction.
    private var slots: [Sticker?] = []
    private var holes = 0
    /// stickerId -> index in `slots`, for live stickers only.
    private var positions: [String: Int] = [:]
    /// Every entry of `leaseDeadlines`, plus stale entries that are dropped lazily. The
    /// minimum is always a live entry (see `settleLeaseQueue`).
    private var leaseQueue = MinHeap<LeaseEntry>()

    public init(roomId: String) {
        self.roomId = roomId
    }

    /// A room exists from its first accepted event.
    public var exists: Bool { version > 0 }

    /// The live stickers in creation order.
    public var stickers: [Sticker] { slots.compactMap { $0 } }

    public var stickerCount: Int { positions.count }

    public func sticker(_ id: String) -> Sticker? {
        positions[id].flatMap { slots[$0] }
    }

    public func isDeleted(_ id: String) -> Bool { tombstones.contains(id) }

    /// When the coordinator must next call `expireLeases(now:)`; nil when no lock is held.
    public var nextLeaseDeadline: Millis? { leaseQueue.min?.deadline }

    // MARK: Applying events

    /// Applies one ordered edit event from `user` under the contract's rules. Accepted:
    /// the version grows by one, the room's and the sticker's `updatedAt` become the
    /// event's timestamp, and a sender who holds the lock afterwards gets a lease until
    /// `now + lease`. Rejected: nothing changes.
    public mutating func apply(_ event: EditEvent, from user: String, now: Millis, lease: Millis) -> RoomOutcome {
        let id = event.stickerId
        let position = positions[id]
        let subject: StickerRules.Subject
        if let position {
            subject = .live(owner: slots[position].unsafelyUnwrapped.owner)
        } else if tombstones.contains(id) {
            subject = .deleted
        } else {
            subject = .absent
        }
        if let rejection = StickerRules.check(event, against: subject, from: user) {
            return .rejected(rejection, version: exists ? version : nil)
        }

        version += 1
        updatedAt = event.timestamp
        let after: Sticker?
        let kind: RoomChange.Kind
        switch event.type {
        case .create:
            let sticker = Sticker(creating: event, by: user)
            positions[id] = slots.count
            slots.append(sticker)
            setLease(id, deadline: Self.deadline(now: now, lease: lease))
            after = sticker
            kind = .create
        case .delete:
            let position = position.unsafelyUnwrapped
            slots[position] = nil
            holes += 1
            positions.removeValue(forKey: id)
            tombstones.insert(id)
            clearLease(id)
            compactIfSparse()
            after = nil
            kind = .delete
        case .acquire, .update, .release:
            let position = position.unsafelyUnwrapped
            slots[position]!.apply(event, by: user)
            after = slots[position]
            if event.type == .release {
                clearLease(id)
                kind = .release
            } else {
                setLease(id, deadline: Self.deadline(now: now, lease: lease))
                kind = event.type == .acquire ? .acquire : .update
            }
        }
        return .accepted(RoomChange(version: version, eventId: event.eventId, userId: user, type: kind, stickerId: id, sticker: after))
    }

    // MARK: Lock expiry

    /// Releases every lock whose lease deadline is at or before `now`, earliest first:
    /// one `expire` change (and one version) each, the sticker's `updatedAt` = `now`.
    public mutating func expireLeases(now: Millis) -> [RoomChange] {
        var changes: [RoomChange] = []
        while let top = leaseQueue.min, top.deadline <= now {
            leaseQueue.popMin()
            guard leaseDeadlines[top.stickerId] == top.deadline else { continue }
            changes.append(expireLock(top.stickerId, now: now))
        }
        settleLeaseQueue()
        return changes
    }

    /// Releases every lock `user` holds (their presence grace ran out), in creation order.
    public mutating func expireLocks(ownedBy user: String, now: Millis) -> [RoomChange] {
        var owned: [(position: Int, id: String)] = []
        for id in leaseDeadlines.keys {
            if let position = positions[id], slots[position]?.owner == user {
                owned.append((position, id))
            }
        }
        owned.sort { $0.position < $1.position }
        let changes = owned.map { expireLock($0.id, now: now) }
        settleLeaseQueue()
        return changes
    }

    private mutating func expireLock(_ id: String, now: Millis) -> RoomChange {
        leaseDeadlines.removeValue(forKey: id)
        let position = positions[id]!
        slots[position]!.owner = nil
        slots[position]!.updatedAt = now
        version += 1
        updatedAt = now
        return RoomChange(version: version, eventId: nil, userId: nil, type: .expire, stickerId: id, sticker: slots[position])
    }

    // MARK: Bookkeeping

    private static func deadline(now: Millis, lease: Millis) -> Millis {
        let (sum, overflow) = now.addingReportingOverflow(lease)
        return overflow ? .max : sum
    }

    private mutating func setLease(_ id: String, deadline: Millis) {
        let previous = leaseDeadlines.updateValue(deadline, forKey: id)
        guard previous != deadline else { return }
        leaseQueue.push(LeaseEntry(deadline: deadline, stickerId: id))
        if previous != nil { settleLeaseQueue() }
    }

    private mutating func clearLease(_ id: String) {
        guard leaseDeadlines.removeValue(forKey: id) != nil else { return }
        settleLeaseQueue()
    }

    /// Drops stale entries from the top of the lease queue, so that its minimum is a live
    /// lease, and rebuilds it when stale entries outnumber live ones.
    private mutating func settleLeaseQueue() {
        if leaseQueue.count > 2 * leaseDeadlines.count + 64 {
            rebuildLeaseQueue()
            return
        }
        while let top = leaseQueue.min, leaseDeadlines[top.stickerId] != top.deadline {
            leaseQueue.popMin()
        }
    }

    mutating func rebuildLeaseQueue() {
        leaseQueue = MinHeap(leaseDeadlines.map { LeaseEntry(deadline: $0.value, stickerId: $0.key) })
    }

    private mutating func compactIfSparse() {
        guard holes > 32, holes * 2 > slots.count else { return }
        slots.removeAll(where: { $0 == nil })
        holes = 0
        for (index, sticker) in slots.enumerated() {
            positions[sticker.unsafelyUnwrapped.id] = index
        }
    }

    /// Restores a state from its parts (see `RoomState+Persistence`); the caller has
    /// checked that they are consistent.
    init(roomId: String, version: Int64, updatedAt: Millis, stickers: [Sticker], tombstones: Set<String>, leaseDeadlines: [String: Millis]) {
        self.roomId = roomId
        self.version = version
        self.updatedAt = updatedAt
        self.tombstones = tombstones
        self.leaseDeadlines = leaseDeadlines
        slots = stickers
        for (index, sticker) in stickers.enumerated() {
            positions[sticker.id] = index
        }
        rebuildLeaseQueue()
    }
}

/// A lock's deadline in the lease queue. Ties go by sticker id, so expiry order is the
/// same on every run and after a restart.
private struct LeaseEntry: Comparable, Sendable {
    var deadline: Millis
    var stickerId: String

    static func < (a: LeaseEntry, b: LeaseEntry) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.stickerId.utf8.lexicographicallyPrecedes(b.stickerId.utf8)
    }
}

extension RoomState: Equatable {
    /// Equal when they hold the same room: the slot layout and lease queue are not compared.
    public static func == (a: RoomState, b: RoomState) -> Bool {
        a.roomId == b.roomId && a.version == b.version && a.updatedAt == b.updatedAt
            && a.positions.count == b.positions.count && a.tombstones == b.tombstones
            && a.leaseDeadlines == b.leaseDeadlines && a.stickers == b.stickers
    }
}
