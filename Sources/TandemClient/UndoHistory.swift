import TandemCore

/// One person's undo and redo in one room, without I/O (CONTRACT "Room history, restore
/// and cursors": undo is the client's). ``TandemClient/undo(room:timestamp:)`` and
/// ``TandemClient/redo(room:timestamp:)`` drive it; it can be driven by hand as well.
///
/// What is recorded: this client's own `create`, `update` and `delete` once the
/// coordinator accepted them (``sent(_:shown:)``, then ``settled(_:accepted:)``), each
/// with how the sticker looked before and after (image and frame). `acquire` and
/// `release` are not recorded: they are lock handling, not edits a person undoes, and they
/// neither clear the redo stack nor show up on it. An update that changes nothing is not
/// recorded either. A newly accepted change clears the redo stack.
///
/// What an undo sends, an ordinary event under the same rules:
/// - an update: an `update` back to the frame and image before it;
/// - a create: a `delete` of the sticker;
/// - a delete: a `create` with the image and frame it had, under a NEW id (the deleted id
///   is tombstoned for good). Later undos and redos of that sticker follow it to its new
///   id (``currentId(of:)``).
/// A redo takes the undo back the same way (a create again under a new id), to the look
/// the undo replaced: an undo then a redo leave the room as it was, even when someone else
/// moved the sticker after this person did (the redo puts back their move, not only this
/// person's); likewise an undo after a redo puts back what the redo replaced.
///
/// Locks: an undo or a redo leaves the sticker as this person held it. An update of a
/// sticker nobody held takes its lock (the contract's rule), so a `release` follows it;
/// a sticker this person held stays held. A sticker made again by a `create` is released
/// at once (nobody is dragging it). A sticker someone else holds is not touched: the
/// coordinator refuses with `owned_by_other`.
///
/// When the coordinator refuses an undo or redo, the entry stays on its stack if the
/// refusal may pass (`owned_by_other`: the other person lets go; `rate_limited`;
/// `room_full`; no answer at all), so trying again later works; it is dropped when it can
/// never apply (the sticker was deleted meanwhile, `forbidden`, `not_member`, ...), so the
/// next undo goes on to the change before it.
public struct UndoHistory: Sendable, Equatable {
    /// What a sticker looks like: what an undo puts back.
    public struct Look: Sendable, Equatable {
        public var image: String
        public var frame: Frame

        public init(image: String, frame: Frame) {
            self.image = image
            self.frame = frame
        }

        public init(_ sticker: Sticker) {
            self.init(image: sticker.image, frame: sticker.frame)
        }
    }

    /// One accepted change of this person's.
    public struct Entry: Sendable, Equatable {
        public enum Kind: String, Sendable {
            case create, update, delete
        }

        public var kind: Kind
        /// The sticker as this person first knew it: its id then. After an undo or redo
        /// made it again under a new id, ``UndoHistory/currentId(of:)`` names it.
        public var sticker: String
        /// The look before the change (nil for a create).
        public var before: Look?
        /// The look after the change (nil for a delete).
        public var after: Look?
        /// Tells entries apart (the same change can be on a stack only once).
        public let serial: Int
    }

    public enum Direction: String, Sendable {
        case undo, redo
    }

    /// What to send for one undo or redo (``nextStep(_:eventId:timestamp:newStickerId:shown:)``).
    public struct Step: Sendable, Equatable {
        public var direction: Direction
        public var entry: Entry
        /// The event: the inverse of the entry's change (undo), or the change again (redo).
        public var event: EditEvent
        /// Once `event` is accepted, send a `release` of ``stickerAfter``: the event took a
        /// lock this person did not hold before.
        public var releaseAfter: Bool
        /// How the sticker looked when the step was made (nil: not shown): what the step
        /// replaces, and so what the step that takes it back puts back.
        public var replaced: Look?

        /// The sticker the step leaves in the room: the new id of a `create`, else the
        /// one it changed.
        public var stickerAfter: String { event.stickerId }

        /// "undo update s1", for people and the logs.
        public var label: String { "\(direction.rawValue) \(entry.kind.rawValue) \(event.stickerId)" }
    }

    /// What became of a step's event.
    public enum Outcome: Sendable, Equatable {
        case accepted
        case rejected(ReceiptCode?)
        /// No receipt came (the client gave up or closed): it may still be applied.
        case unanswered
    }

    /// The most entries kept on the undo stack; the oldest go first.
    public let limit: Int
    /// Undoable changes, oldest first: the last is the next undo.
    public private(set) var undoStack: [Entry] = []
    /// Undone changes, oldest first: the last is the next redo.
    public private(set) var redoStack: [Entry] = []
    /// Ordinary edits sent and waiting for their receipt, by eventId.
    private var sentEntries: [String: Entry] = [:]
    /// A sticker's first id -> the id it has now (only for stickers made again).
    private var currentIds: [String: String] = [:]
    /// The id a sticker has now -> its first id (only for stickers made again).
    private var firstIds: [String: String] = [:]
    private var nextSerial = 0

    public init(limit: Int = 100) {
        self.limit = max(1, limit)
    }

    public var canUndo: Bool { !undoStack.isEmpty }
    public var canRedo: Bool { !redoStack.isEmpty }

    /// The id the sticker first known as `sticker` has now.
    public func currentId(of sticker: String) -> String { currentIds[sticker] ?? sticker }

    /// The id a sticker that has `id` now was first known by (itself unless an undo or
    /// redo made it again).
    public func firstId(of id: String) -> String { firstIds[id] ?? id }

    // MARK: Recording

    /// An ordinary edit of this person's is on its way. `shown`: the sticker as this
    /// person saw it just before (its own pending edits included), nil when not shown;
    /// an update or delete of a sticker not shown is not recorded (there is no "before").
    public mutating func sent(_ event: EditEvent, shown: Sticker?) {
        let first = firstIds[event.stickerId] ?? event.stickerId
        let entry: Entry
        switch event.type {
        case .create:
            guard let image = event.image, let frame = event.frame else { return }
            entry = make(.create, first, before: nil, after: Look(image: image, frame: frame))
        case .update:
            guard let shown else { return }
            let before = Look(shown)
            let after = Look(image: event.image ?? shown.image, frame: event.frame ?? shown.frame)
            guard before != after else { return }
            entry = make(.update, first, before: before, after: after)
        case .delete:
            guard let shown else { return }
            entry = make(.delete, first, before: Look(shown), after: nil)
        case .acquire, .release, .invite, .remove, .role, .leave, .restore:
            return
        }
        sentEntries[event.eventId] = entry
    }

    /// The receipt of an edit given to ``sent(_:shown:)``: accepted (or a duplicate of an
    /// accepted one) puts it on the undo stack and clears the redo stack; anything else
    /// forgets it. Other ids are ignored.
    public mutating func settled(_ eventId: String, accepted: Bool) {
        guard let entry = sentEntries.removeValue(forKey: eventId), accepted else { return }
        undoStack.append(entry)
        if undoStack.count > limit { undoStack.removeFirst(undoStack.count - limit) }
        redoStack.removeAll()
    }

    /// Forgets everything: after a restore (the room went back to another version) or
    /// a new epoch (what was known is gone).
    public mutating func clear() {
        undoStack.removeAll()
        redoStack.removeAll()
        sentEntries.removeAll()
        currentIds.removeAll()
        firstIds.removeAll()
    }

    // MARK: Undo and redo

    /// The next undo or redo, nil when its stack is empty. Nothing changes until
    /// ``finish(_:_:)`` says what became of it.
    ///
    /// - Parameters:
    ///   - newStickerId: the id for a sticker made again (a delete undone, a create
    ///     redone): one never used in the room.
    ///   - shown: the room as this person sees it now, by sticker id (whether an update
    ///     must take the lock, and so release it after).
    public func nextStep(
        _ direction: Direction, eventId: String, timestamp: Millis, newStickerId: String, shown: (String) -> Sticker?
    ) -> Step? {
        guard let entry = direction == .undo ? undoStack.last : redoStack.last else { return nil }
        let id = currentId(of: entry.sticker)
        // What the sticker must look like afterwards, and whether it must exist.
        let target: Look?
        switch (direction, entry.kind) {
        case (.undo, .create), (.redo, .delete): target = nil
        case (.undo, _): target = entry.before
        case (.redo, _): target = entry.after
        }
        let current = shown(id)
        let replaced = current.map(Look.init)
        guard let target else {
            return Step(direction: direction, entry: entry,
                        event: EditEvent(eventId: eventId, type: .delete, stickerId: id, timestamp: timestamp), releaseAfter: false,
                        replaced: replaced)
        }
        let makesAgain = (direction == .undo && entry.kind == .delete) || (direction == .redo && entry.kind == .create)
        if makesAgain {
            let event = EditEvent(eventId: eventId, type: .create, stickerId: newStickerId, timestamp: timestamp, image: target.image, frame: target.frame)
            return Step(direction: direction, entry: entry, event: event, releaseAfter: true, replaced: nil)
        }
        let event = EditEvent(eventId: eventId, type: .update, stickerId: id, timestamp: timestamp, image: target.image, frame: target.frame)
        // Nobody held it: the update takes the lock, which goes back at once. Held by this
        // person: it stays held. Held by another, or gone: the coordinator refuses.
        return Step(direction: direction, entry: entry, event: event, releaseAfter: current != nil && current?.owner == nil,
                    replaced: replaced)
    }

    /// What became of a step's event (the release after it does not matter here).
    /// Accepted: the entry moves to the other stack, and a sticker made again is known
    /// by its new id from then on. Refused: see the type's notes. Unanswered: it stays.
    public mutating func finish(_ step: Step, _ outcome: Outcome) {
        let from = step.direction == .undo ? \UndoHistory.undoStack : \UndoHistory.redoStack
        guard let index = self[keyPath: from].lastIndex(where: { $0.serial == step.entry.serial }) else { return }
        switch outcome {
        case .accepted:
            var entry = self[keyPath: from].remove(at: index)
            // What the step replaced is what taking it back puts back: a redo right after
            // an undo leaves the room as it was before the undo, even where someone else
            // had changed the sticker since this person's change.
            if step.direction == .undo {
                if entry.kind != .delete, let replaced = step.replaced { entry.after = replaced }
                redoStack.append(entry)
            } else {
                if entry.kind != .create, let replaced = step.replaced { entry.before = replaced }
                undoStack.append(entry)
            }
            if step.event.type == .create {
                let old = currentId(of: entry.sticker)
                firstIds[old] = nil
                currentIds[entry.sticker] = step.event.stickerId
                firstIds[step.event.stickerId] = entry.sticker
            }
        case .rejected(let code):
            if !Self.mayPass(code) { self[keyPath: from].remove(at: index) }
        case .unanswered:
            break
        }
    }

    /// Refusals that may not hold later: the entry stays for another try.
    static func mayPass(_ code: ReceiptCode?) -> Bool {
        switch code {
        case .ownedByOther?, .rateLimited?, .roomFull?: true
        default: false
        }
    }

    private mutating func make(_ kind: Entry.Kind, _ sticker: String, before: Look?, after: Look?) -> Entry {
        nextSerial += 1
        return Entry(kind: kind, sticker: sticker, before: before, after: after, serial: nextSerial)
    }
}
