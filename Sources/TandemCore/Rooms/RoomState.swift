/// One room's stickers and locks: the coordinator's source of truth, a pure value.
///
/// `apply` implements the contract's Rooms rules. Every operation is O(1) or O(log n)
/// (amortised) in the number of stickers: a dictionary maps each id to its slot in
/// creation order, a deleted sticker leaves a dead slot that is squeezed out once dead
/// slots make up half of them, and lock deadlines sit in a min-heap of (deadline, slot)
/// with lazy removal, so an event costs one hash lookup.
public struct RoomState: Sendable {
    public let roomId: String
    /// 0 while the room does not exist; its first accepted event makes it 1.
    public private(set) var version: Int64 = 0
    /// The timestamp of the last change (the coordinator's clock for an expiry).
    public private(set) var updatedAt: Millis = 0
    /// Ids that were deleted; they can never be created again.
    public private(set) var tombstones: Set<String> = []
    /// Who belongs to the room, in the order they joined (CONTRACT "Room membership").
    public private(set) var members = RoomMembers()

    /// Stickers in creation order with their lock deadlines; deleted ones stay as dead
    /// slots until the next compaction.
    private var slots: [Slot] = []
    private var deadSlots = 0
    /// stickerId -> index in `slots`, for live stickers only. The one hash per event.
    private var positions: [String: Int] = [:]
    /// (deadline, slot) of every held lock, plus stale entries dropped lazily. Its
    /// minimum is always a live lease (see `settleLeaseQueue`).
    private var leaseQueue = MonotoneQueue<LeaseEntry>()
    private var leaseCount = 0

    private struct Slot: Sendable {
        var sticker: Sticker
        var isLive = true
        /// The lease deadline while someone holds the lock.
        var lease: Millis?
    }

    /// A lock's deadline in the lease queue. Ties go by slot, i.e. creation order, so
    /// expiry order is the same on every run and after a restart.
    private struct LeaseEntry: Comparable, Sendable {
        var deadline: Millis
        var slot: Int
        static func < (a: LeaseEntry, b: LeaseEntry) -> Bool {
            a.deadline != b.deadline ? a.deadline < b.deadline : a.slot < b.slot
        }
    }

    public init(roomId: String) {
        self.roomId = roomId
    }

    /// A room exists from its first accepted event.
    public var exists: Bool { version > 0 }

    /// The last member left: every later event is `not_member`, and the id is never
    /// used again.
    public var isClosed: Bool { exists && members.isEmpty }

    /// The live stickers in creation order.
    public var stickers: [Sticker] {
        var out: [Sticker] = []
        out.reserveCapacity(positions.count)
        for slot in slots where slot.isLive { out.append(slot.sticker) }
        return out
    }

    public var stickerCount: Int { positions.count }

    public func sticker(_ id: String) -> Sticker? {
        positions[id].map { slots[$0].sticker }
    }

    public func isDeleted(_ id: String) -> Bool { tombstones.contains(id) }

    /// The lease deadline of every held lock, by sticker id (O(n): for inspection).
    public var leaseDeadlines: [String: Millis] {
        var out: [String: Millis] = [:]
        for slot in slots where slot.isLive {
            if let lease = slot.lease { out[slot.sticker.id] = lease }
        }
        return out
    }

    /// The live stickers in creation order, each with its lease deadline if locked.
    /// Visits the live stickers in creation order with their lease deadlines, without
    /// building an array (the encoders' hot path).
    func forEachLive(_ body: (Sticker, Millis?) -> Void) {
        for slot in slots where slot.isLive { body(slot.sticker, slot.lease) }
    }

    var stickersWithLeases: [(sticker: Sticker, lease: Millis?)] {
        slots.compactMap { $0.isLive ? ($0.sticker, $0.lease) : nil }
    }

    public func leaseDeadline(of id: String) -> Millis? {
        positions[id].flatMap { slots[$0].lease }
    }

    /// When the coordinator must next call `expireLeases(now:)`; nil when no lock is held.
    public var nextLeaseDeadline: Millis? { leaseQueue.min?.deadline }

    // MARK: Applying events

    /// What one event did to a room under the whole of the rules: its outcome, and the
    /// lock expiries it caused first (the locks of a member who was removed or left),
    /// each with a version of its own before the event's.
    public struct Applied: Sendable, Equatable {
        public var outcome: RoomOutcome
        public var expired: [RoomChange] = []

        /// Every change, in version order.
        public var changes: [RoomChange] {
            guard let change = outcome.change else { return [] }
            return expired + [change]
        }
    }

    /// Applies one ordered event from `user` under the contract's rules, membership
    /// first (CONTRACT "Room membership"), then the sticker rules. A room that does not
    /// exist is made by a `create` or an `invite` (the sender becomes its owner); a
    /// refused event leaves no trace. A closed room refuses everything.
    /// `stamp`: the time of day the lock expiries it causes are stamped with (default
    /// the event's timestamp).
    public mutating func apply(
        _ event: EditEvent, from user: String, now: Millis, lease: Millis, rules: MembershipRules.Context, stamp: Millis? = nil
    ) -> Applied {
        if !exists {
            guard event.type == .create || event.type == .invite else {
                return Applied(outcome: .rejected(Rejection(.notMember, "room \(roomId) does not exist: \(event.type.rawValue) needs a member"), version: nil))
            }
            let founder = RoomMember(userId: user, role: .owner, since: event.timestamp, invitedBy: nil)
            if event.type == .invite {
                let founding = RoomMembers([founder])
                if let rejection = MembershipRules.check(event, members: founding, from: user, context: rules) {
                    return Applied(outcome: .rejected(rejection, version: nil))
                }
                members = founding
                return Applied(outcome: applyMembership(event, from: user))
            }
            let outcome = apply(event, from: user, now: now, lease: lease)
            if outcome.isAccepted { members = RoomMembers([founder]) }
            return Applied(outcome: outcome)
        }
        if isClosed {
            return Applied(outcome: .rejected(Rejection(.notMember, "room \(roomId) is closed: its last member left"), version: version))
        }
        if let rejection = MembershipRules.check(event, members: members, from: user, context: rules) {
            return Applied(outcome: .rejected(rejection, version: version))
        }
        guard event.type.isMembership else {
            return Applied(outcome: apply(event, from: user, now: now, lease: lease))
        }
        // A member who leaves, is removed or is made a viewer (who may not edit) loses its
        // locks in the same step, first.
        var expired: [RoomChange] = []
        switch event.type {
        case .leave:
            expired = expireLocks(ownedBy: user, now: now, stamp: stamp ?? event.timestamp)
        case .remove:
            expired = expireLocks(ownedBy: event.member ?? "", now: now, stamp: stamp ?? event.timestamp)
        case .role where event.role == .viewer:
            expired = expireLocks(ownedBy: event.member ?? "", now: now, stamp: stamp ?? event.timestamp)
        default:
            break
        }
        return Applied(outcome: applyMembership(event, from: user), expired: expired)
    }

    /// Applies a membership event the rules accepted: one version.
    private mutating func applyMembership(_ event: EditEvent, from user: String) -> RoomOutcome {
        version += 1
        updatedAt = event.timestamp
        var change: RoomChange
        switch event.type {
        case .invite:
            let member = event.member ?? ""
            let role = event.role ?? .editor
            members.add(RoomMember(userId: member, role: role, since: event.timestamp, invitedBy: user))
            change = RoomChange(version: version, eventId: event.eventId, userId: user, type: .invite, member: member, role: role)
        case .role:
            let member = event.member ?? ""
            let role = event.role ?? .editor
            members.setRole(role, of: member)
            change = RoomChange(version: version, eventId: event.eventId, userId: user, type: .role, member: member, role: role)
        case .remove:
            let member = event.member ?? ""
            let role = members.role(of: member) ?? .editor
            members.remove(member)
            change = RoomChange(version: version, eventId: event.eventId, userId: user, type: .remove, member: member, role: role)
        case .leave:
            let role = members.role(of: user) ?? .editor
            let heir = members.remove(user)
            change = RoomChange(version: version, eventId: event.eventId, userId: user, type: .leave, member: user, role: role)
            change.newOwner = heir
            if members.isEmpty { closeRoom() }
        case .create, .acquire, .update, .release, .delete, .restore:
            preconditionFailure("\(event.type) is not a membership event")
        }
        return .accepted(change)
    }

    /// The last member left: nothing of the room is kept but its id, version and time.
    private mutating func closeRoom() {
        slots = []
        deadSlots = 0
        positions = [:]
        tombstones = []
        leaseQueue = MonotoneQueue()
        leaseCount = 0
    }

    /// Restores the members a restart read (their rows are the store's, not the body's).
    public mutating func restore(members: RoomMembers) {
        self.members = members
    }

    /// Applies one ordered edit event from `user` under the sticker rules alone (the
    /// caller has checked membership: ``apply(_:from:now:lease:rules:)`` does). Accepted:
    /// the version grows by one, the room's and the sticker's `updatedAt` become the
    /// event's timestamp, and a sender who holds the lock afterwards gets a lease until
    /// `now + lease`. Rejected: nothing changes.
    public mutating func apply(_ event: EditEvent, from user: String, now: Millis, lease: Millis) -> RoomOutcome {
        let id = event.stickerId
        let position = positions[id]
        let subject: StickerRules.Subject
        if let position {
            subject = .live(owner: slots[position].sticker.owner)
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
            slots.append(Slot(sticker: sticker))
            setLease(slots.count - 1, deadline: Self.deadline(now: now, lease: lease))
            after = sticker
            kind = .create
        case .delete:
            let position = position.unsafelyUnwrapped
            clearLease(position)
            slots[position].isLive = false
            deadSlots += 1
            positions.removeValue(forKey: id)
            tombstones.insert(id)
            compactIfSparse()
            after = nil
            kind = .delete
        case .acquire, .update, .release:
            let position = position.unsafelyUnwrapped
            slots[position].sticker.apply(event, by: user)
            after = slots[position].sticker
            if event.type == .release {
                clearLease(position)
                kind = .release
            } else {
                setLease(position, deadline: Self.deadline(now: now, lease: lease))
                kind = event.type == .acquire ? .acquire : .update
            }
        case .invite, .remove, .role, .leave, .restore:
            preconditionFailure("StickerRules refuses membership events and restores")
        }
        return .accepted(RoomChange(version: version, eventId: event.eventId, userId: user, type: kind, stickerId: id, sticker: after))
    }

    // MARK: Restore

    /// Why a restore from `user` to its version cannot be applied to this room as it is
    /// (the rules that need no history): nil when it may, once the room at that version is
    /// known. A room that does not exist or is closed: `not_member`; a viewer:
    /// `forbidden`; a version not below the current one: `invalid_payload`.
    public func checkRestore(_ event: EditEvent, from user: String, rules: MembershipRules.Context) -> Rejection? {
        guard exists else { return Rejection(.notMember, "room \(roomId) does not exist: restore needs a member") }
        guard !isClosed else { return Rejection(.notMember, "room \(roomId) is closed: its last member left") }
        if let rejection = MembershipRules.check(event, members: members, from: user, context: rules) { return rejection }
        let target = event.restoreVersion ?? 0
        guard target >= 1, target < version else {
            return .invalid("version must be between 1 and \(version - 1) (the room is at version \(version)), not \(target)")
        }
        return nil
    }

    /// Applies a restore that ``checkRestore(_:from:rules:)`` let through: the stickers
    /// become exactly `stickers` (the room right after the event's version, in creation
    /// order), every lock released, each sticker's `updatedBy` and `updatedAt` the
    /// restore's; stickers live now and not in `stickers` are deleted (tombstoned), and
    /// deleted ones in `stickers` come back. One version, one `restore` change.
    public mutating func applyRestore(_ event: EditEvent, stickers restored: [Sticker], from user: String) -> RoomOutcome {
        var restoredIds = Set<String>()
        restoredIds.reserveCapacity(restored.count)
        for sticker in restored { restoredIds.insert(sticker.id) }
        for slot in slots where slot.isLive && !restoredIds.contains(slot.sticker.id) {
            tombstones.insert(slot.sticker.id)
        }
        tombstones.subtract(restoredIds)
        slots = restored.map { sticker in
            var sticker = sticker
            sticker.owner = nil
            sticker.updatedBy = user
            sticker.updatedAt = event.timestamp
            return Slot(sticker: sticker)
        }
        deadSlots = 0
        positions = [:]
        positions.reserveCapacity(slots.count)
        for (index, slot) in slots.enumerated() { positions[slot.sticker.id] = index }
        leaseQueue = MonotoneQueue()
        leaseCount = 0
        version += 1
        updatedAt = event.timestamp
        return .accepted(RoomChange(version: version, eventId: event.eventId, userId: user, restoredFrom: event.restoreVersion ?? 0, stickers: stickers))
    }

    // MARK: Lock expiry

    /// Releases every lock whose lease deadline is at or before `now`, earliest first
    /// (ties in creation order): one `expire` change (and one version) each, the
    /// sticker's `updatedAt` = `now`.
    /// `stamp`: the time of day the expiry is stamped with (`updatedAt`; default `now`),
    /// when deadlines run on another clock than the wire's.
    public mutating func expireLeases(now: Millis, stamp: Millis? = nil) -> [RoomChange] {
        var changes: [RoomChange] = []
        while let top = leaseQueue.min, top.deadline <= now {
            leaseQueue.popMin()
            guard slots[top.slot].isLive, slots[top.slot].lease == top.deadline else { continue }
            changes.append(expireLock(top.slot, now: stamp ?? now))
        }
        settleLeaseQueue()
        return changes
    }

    /// Releases every lock `user` holds (their presence grace ran out), in creation order.
    public mutating func expireLocks(ownedBy user: String, now: Millis, stamp: Millis? = nil) -> [RoomChange] {
        guard leaseCount > 0 else { return [] }
        var changes: [RoomChange] = []
        for index in slots.indices where slots[index].isLive && slots[index].lease != nil && slots[index].sticker.owner == user {
            changes.append(expireLock(index, now: stamp ?? now))
        }
        settleLeaseQueue()
        return changes
    }

    private mutating func expireLock(_ index: Int, now: Millis) -> RoomChange {
        slots[index].lease = nil
        leaseCount -= 1
        slots[index].sticker.owner = nil
        slots[index].sticker.updatedAt = now
        version += 1
        updatedAt = now
        let sticker = slots[index].sticker
        return RoomChange(version: version, eventId: nil, userId: nil, type: .expire, stickerId: sticker.id, sticker: sticker)
    }

    // MARK: Bookkeeping

    private static func deadline(now: Millis, lease: Millis) -> Millis {
        let (sum, overflow) = now.addingReportingOverflow(lease)
        return overflow ? .max : sum
    }

    private mutating func setLease(_ index: Int, deadline: Millis) {
        let previous = slots[index].lease
        guard previous != deadline else { return }
        slots[index].lease = deadline
        leaseQueue.push(LeaseEntry(deadline: deadline, slot: index))
        if previous == nil {
            leaseCount += 1
        } else {
            settleLeaseQueue()
        }
    }

    private mutating func clearLease(_ index: Int) {
        guard slots[index].lease != nil else { return }
        slots[index].lease = nil
        leaseCount -= 1
        settleLeaseQueue()
    }

    /// Drops stale entries from the top of the lease queue, so that its minimum is a live
    /// lease, and rebuilds it when stale entries outnumber live ones.
    private mutating func settleLeaseQueue() {
        if leaseQueue.count > 2 * leaseCount + 64 {
            rebuildLeaseQueue()
            return
        }
        while let top = leaseQueue.min, !(slots[top.slot].isLive && slots[top.slot].lease == top.deadline) {
            leaseQueue.popMin()
        }
    }

    private mutating func rebuildLeaseQueue() {
        var entries: [LeaseEntry] = []
        entries.reserveCapacity(leaseCount)
        for (index, slot) in slots.enumerated() where slot.isLive {
            if let lease = slot.lease { entries.append(LeaseEntry(deadline: lease, slot: index)) }
        }
        leaseQueue = MonotoneQueue(entries)
    }

    /// Squeezes out dead slots once they make up half of them (amortised O(1) per delete).
    private mutating func compactIfSparse() {
        guard deadSlots > 32, deadSlots * 2 > slots.count else { return }
        slots.removeAll(where: { !$0.isLive })
        deadSlots = 0
        for (index, slot) in slots.enumerated() {
            positions[slot.sticker.id] = index
        }
        rebuildLeaseQueue()
    }

    /// Restores a state from its parts (see `RoomState+Persistence`); the caller has
    /// checked that they are consistent.
    init(roomId: String, version: Int64, updatedAt: Millis, stickers: [Sticker], tombstones: Set<String>, leaseDeadlines: [String: Millis]) {
        self.roomId = roomId
        self.version = version
        self.updatedAt = updatedAt
        self.tombstones = tombstones
        slots = stickers.map { Slot(sticker: $0, lease: leaseDeadlines[$0.id]) }
        leaseCount = slots.count(where: { $0.lease != nil })
        for (index, sticker) in stickers.enumerated() {
            positions[sticker.id] = index
        }
        rebuildLeaseQueue()
    }
}

extension RoomState: Equatable {
    /// Equal when they hold the same room: the slot layout and lease queue are not compared.
    public static func == (a: RoomState, b: RoomState) -> Bool {
        a.roomId == b.roomId && a.version == b.version && a.updatedAt == b.updatedAt
            && a.positions.count == b.positions.count && a.tombstones == b.tombstones
            && a.leaseDeadlines == b.leaseDeadlines && a.stickers == b.stickers && a.members == b.members
    }
}
