/// What an agent shows of a room: the coordinator's confirmed state (from snapshots and
/// changes) with the agent's own edits laid over it until their receipts come back.
///
/// - `applyLocal` shows an edit at once and keeps it pending under its eventId.
/// - A rejected receipt drops the edit: the sticker rolls back to the confirmed state
///   (with the agent's other pending edits on it, if any, laid over again).
/// - An accepted receipt keeps the edit shown until the confirmed version reaches the
///   receipt's version, so the sticker does not flicker back in between.
/// - Snapshots and changes never overwrite a sticker with a pending edit before that
///   edit's receipt.
public struct RoomReplica: Sendable {
    public let roomId: String
    /// The epoch of the confirmed state; nil before the first snapshot.
    public private(set) var epoch: String?
    /// The confirmed version; 0 before the first snapshot.
    public private(set) var version: Int64 = 0

    /// The members as the coordinator last said, in the order they joined.
    public private(set) var members: [RoomMember] = []
    private var confirmed: [Sticker] = []
    private var confirmedIndex: [String: Int] = [:]
    private var pending: [Pending] = []
    /// What is shown, by sticker id, for stickers with pending edits.
    private var overlay: [String: Shown] = [:]

    private struct Pending: Sendable {
        var event: EditEvent
        var user: String
        /// Set by an accepted (or duplicate) receipt: shown until `version` reaches it.
        var confirmedAt: Int64?
    }

    private enum Shown: Sendable {
        case sticker(Sticker)
        case hidden
    }

    public init(roomId: String) {
        self.roomId = roomId
    }

    // MARK: What the agent shows

    /// The stickers to show, in creation order: confirmed ones (with pending edits laid
    /// over them), then the agent's own creates that are not confirmed yet.
    public var visibleStickers: [Sticker] {
        // Nothing laid over (no edit of this client's pending, the common case): the
        // confirmed stickers as they are, not looked up and copied one by one.
        if overlay.isEmpty { return confirmed }
        var out: [Sticker] = []
        out.reserveCapacity(confirmed.count)
        for sticker in confirmed {
            switch overlay[sticker.id] {
            case nil: out.append(sticker)
            case .sticker(let shown)?: out.append(shown)
            case .hidden?: continue
            }
        }
        var added = Set<String>()
        for edit in pending where edit.event.type == .create {
            let id = edit.event.stickerId
            guard confirmedIndex[id] == nil, case .sticker(let shown)? = overlay[id], added.insert(id).inserted else { continue }
            out.append(shown)
        }
        return out
    }

    public func visibleSticker(_ id: String) -> Sticker? {
        switch overlay[id] {
        case .sticker(let shown)?: shown
        case .hidden?: nil
        case nil: confirmedIndex[id].map { confirmed[$0] }
        }
    }

    /// The confirmed stickers, in creation order, as the coordinator last said.
    public var confirmedStickers: [Sticker] { confirmed }

    /// The eventIds still waiting for a receipt or for the confirmed state to catch up.
    public var pendingEventIds: [String] { pending.map(\.event.eventId) }

    // MARK: Inputs

    /// Shows the agent's own edit at once and keeps it pending until its receipt. Returns
    /// the rejection the contract's rules predict on what is shown (the edit then shows
    /// nothing); the coordinator decides, so the edit stays pending either way.
    @discardableResult
    public mutating func applyLocal(_ event: EditEvent, as user: String) -> Rejection? {
        if event.type.isMembership || event.type == .restore {
            // Nothing to show ahead of the coordinator: the members change when it says,
            // and a restore's stickers are the room's history, which only it holds.
            pending.append(Pending(event: event, user: user, confirmedAt: nil))
            return nil
        }
        let (after, rejection) = Self.predict(event, by: user, on: visibleSticker(event.stickerId))
        pending.append(Pending(event: event, user: user, confirmedAt: nil))
        overlay[event.stickerId] = after.map(Shown.sticker) ?? .hidden
        return rejection
    }

    /// Takes the receipt of one of the agent's edits; other receipts are ignored.
    public mutating func receipt(_ receipt: Receipt) {
        guard receipt.kind == .room, let index = pending.firstIndex(where: { $0.event.eventId == receipt.id }) else { return }
        let id = pending[index].event.stickerId
        if pending[index].event.type.isMembership || pending[index].event.type == .restore {
            pending.remove(at: index)
            return
        }
        switch receipt.status {
        case .rejected:
            pending.remove(at: index)
            recompute(id)
        case .accepted, .duplicate:
            if let at = receipt.version, at > version {
                pending[index].confirmedAt = at
            } else {
                pending.remove(at: index)
                recompute(id)
            }
        }
    }

    /// Takes a snapshot. One that is not newer than the confirmed version is ignored,
    /// unless its epoch is new: then everything known is thrown away, pending edits
    /// included. Returns whether it was taken.
    @discardableResult
    public mutating func snapshot(_ snapshot: RoomSnapshot) -> Bool {
        guard snapshot.roomId == roomId else { return false }
        if let epoch, epoch == snapshot.epoch {
            guard snapshot.version > version else { return false }
        } else if epoch != nil {
            pending.removeAll()
            overlay.removeAll()
        }
        epoch = snapshot.epoch
        version = snapshot.version
        confirmed = snapshot.stickers
        members = snapshot.members
        reindex()
        settle()
        return true
    }

    /// Applies a RoomChanges that starts at the confirmed version of the same epoch;
    /// anything else is ignored (the next snapshot fills the gap). Returns whether it was
    /// applied.
    @discardableResult
    public mutating func changes(_ changes: RoomChanges) -> Bool {
        guard changes.roomId == roomId, changes.epoch == epoch, changes.fromVersion == version,
              changes.toVersion >= changes.fromVersion else { return false }
        for change in changes.changes {
            if change.type.isMembership {
                applyMembership(change)
                continue
            }
            if change.type == .restore {
                confirmed = change.stickers ?? []
                reindex()
                for id in Set(overlay.keys) { recompute(id) }
                continue
            }
            if let sticker = change.sticker {
                if let index = confirmedIndex[change.stickerId] {
                    confirmed[index] = sticker
                } else {
                    confirmedIndex[change.stickerId] = confirmed.count
                    confirmed.append(sticker)
                }
            } else if let index = confirmedIndex.removeValue(forKey: change.stickerId) {
                confirmed.remove(at: index)
                reindex()
            }
        }
        version = changes.toVersion
        settle()
        return true
    }

    /// The owner as the coordinator last said.
    public var owner: String? { members.first { $0.role == .owner }?.userId }

    // MARK: Internals

    private mutating func applyMembership(_ change: RoomChange) {
        guard let member = change.member else { return }
        switch change.type {
        case .invite:
            members.removeAll { $0.userId == member }
            members.append(RoomMember(userId: member, role: change.role ?? .editor, since: 0, invitedBy: change.userId))
        case .role:
            if let index = members.firstIndex(where: { $0.userId == member }), let role = change.role { members[index].role = role }
        case .remove, .leave:
            members.removeAll { $0.userId == member }
            if let heir = change.newOwner, let index = members.firstIndex(where: { $0.userId == heir }) { members[index].role = .owner }
        case .create, .acquire, .update, .release, .delete, .expire, .restore:
            return
        }
    }

    /// The sticker after `event` on `current` under the contract's rules, or `current`
    /// and the predicted rejection.
    private static func predict(_ event: EditEvent, by user: String, on current: Sticker?) -> (Sticker?, Rejection?) {
        let subject: StickerRules.Subject = current.map { .live(owner: $0.owner) } ?? .absent
        if let rejection = StickerRules.check(event, against: subject, from: user) {
            return (current, rejection)
        }
        switch event.type {
        case .create: return (Sticker(creating: event, by: user), nil)
        case .delete: return (nil, nil)
        case .acquire, .update, .release:
            var sticker = current!
            sticker.apply(event, by: user)
            return (sticker, nil)
        case .invite, .remove, .role, .leave, .restore:
            return (current, nil)
        }
    }

    /// Drops accepted edits the confirmed state has caught up with.
    private mutating func settle() {
        var touched = Set<String>()
        pending.removeAll { edit in
            guard let at = edit.confirmedAt, at <= version else { return false }
            touched.insert(edit.event.stickerId)
            return true
        }
        for id in touched { recompute(id) }
    }

    /// Lays the remaining pending edits of one sticker over its confirmed state again.
    private mutating func recompute(_ id: String) {
        var shown: Sticker? = confirmedIndex[id].map { confirmed[$0] }
        var any = false
        for edit in pending where edit.event.stickerId == id {
            shown = Self.predict(edit.event, by: edit.user, on: shown).0
            any = true
        }
        if any {
            overlay[id] = shown.map(Shown.sticker) ?? .hidden
        } else {
            overlay.removeValue(forKey: id)
        }
    }

    private mutating func reindex() {
        confirmedIndex.removeAll(keepingCapacity: true)
        for (index, sticker) in confirmed.enumerated() {
            confirmedIndex[sticker.id] = index
        }
    }
}
