import Testing
import TandemClient
import TandemCore

/// Undo and redo against the coordinator's own rules: three people edit one room at
/// random (creates, moves, deletes, locks), each with an ``UndoHistory`` fed the way
/// ``TandemClient`` feeds it, and undo and redo among their edits. Every event goes
/// through `RoomState.apply`, the rules engine the coordinator runs.
///
/// Checked after every undo and redo:
/// - it touches one sticker, the one of the change it takes back (or makes one again
///   under a new id): every other sticker stays exactly as it was, so another person's
///   stickers are never changed by it;
/// - a sticker another person holds is not changed at all (the event is refused);
/// - accepted, it leaves the look the entry says, and the locks as a person expects (held
///   only if this person held it before).
/// And from random points: n undos by one person with nobody else acting, then as many
/// redos as undos were accepted, give the room back as it was. Compared by what people see:
/// the same stickers (a sticker made again is matched through ``UndoHistory/currentId(of:)``),
/// the same images and frames, the order of those that kept their ids, everyone else's
/// locks; this person's own locks may have been given back.
@Suite struct UndoPropertyTests {
    static let people = ["alice", "bob", "carol"]
    static let rules = MembershipRules.Context()
    static let lease: Millis = 1_000_000_000

    /// Seeded (TandemCore's SplitMix64), so a failing case replays.
    typealias Random = SplitMix64

    struct World {
        var room = RoomState(roomId: "r")
        var histories: [String: UndoHistory] = [:]
        var now: Millis = 1_000
        var serial = 0
        var rng: Random
        var log: [String] = []

        init(seed: UInt64) {
            rng = Random(seed: seed)
            for person in UndoPropertyTests.people { histories[person] = UndoHistory(limit: 20) }
            // alice makes the room; bob and carol are editors.
            for person in ["bob", "carol"] {
                let invite = EditEvent(eventId: nextId(), type: .invite, member: person, role: .editor, timestamp: now)
                precondition(room.apply(invite, from: "alice", now: now, lease: UndoPropertyTests.lease, rules: UndoPropertyTests.rules).outcome.isAccepted)
            }
        }

        mutating func nextId() -> String {
            serial += 1
            return "e\(serial)"
        }

        mutating func apply(_ event: EditEvent, by person: String) -> RoomOutcome {
            now += 1
            return room.apply(event, from: person, now: now, lease: UndoPropertyTests.lease, rules: UndoPropertyTests.rules).outcome
        }

        /// An ordinary edit, recorded as the client records it.
        mutating func edit(_ person: String) {
            let live = room.stickers.map(\.id)
            let type: EditEvent.Kind = [.create, .create, .update, .update, .update, .delete, .acquire, .release].randomElement(using: &rng)!
            let id: String
            if type == .create || live.isEmpty || Int.random(in: 0..<10, using: &rng) == 0 {
                id = "s\(Int.random(in: 0..<12, using: &rng))"
            } else {
                id = live.randomElement(using: &rng)!
            }
            let frame = Frame(x: Double(Int.random(in: 0..<5, using: &rng)), y: Double(Int.random(in: 0..<5, using: &rng)), width: 10, height: 10)
            let image: String? = type == .create || Bool.random(using: &rng) ? "img\(Int.random(in: 0..<3, using: &rng))" : nil
            let event = EditEvent(eventId: nextId(), type: type, stickerId: id, timestamp: now, image: image,
                                  frame: type == .create || type == .update ? frame : nil)
            histories[person]!.sent(event, shown: room.sticker(id))
            let outcome = apply(event, by: person)
            histories[person]!.settled(event.eventId, accepted: outcome.isAccepted)
            log.append("\(person) \(type.rawValue) \(id): \(outcome.rejection?.code.rawValue ?? "ok")")
        }

        /// One undo or redo, as ``TandemClient`` runs it, with its checks. Returns whether
        /// its event was accepted (nil: nothing to do).
        @discardableResult
        mutating func step(_ direction: UndoHistory.Direction, by person: String) -> Bool? {
            let history = histories[person]!
            guard let entry = direction == .undo ? history.undoStack.last : history.redoStack.last else { return nil }
            serial += 1
            let newId = "\(entry.sticker)-n\(serial)"
            guard let step = history.nextStep(direction, eventId: nextId(), timestamp: now, newStickerId: newId, shown: { room.sticker($0) }) else {
                Issue.record("a stack with an entry gave no step")
                return nil
            }
            let context = "\(log.suffix(12).joined(separator: "\n"))\n\(person) \(step.label)"
            let before = room.stickers
            let target = step.event.stickerId
            let targetBefore = room.sticker(target)
            let outcome = apply(step.event, by: person)
            if let code = outcome.rejection?.code {
                histories[person]!.finish(step, .rejected(code))
                #expect(room.stickers == before, "a refused step changes nothing\n\(context)")
                log.append("\(person) \(step.label): \(code.rawValue)")
                return false
            }
            histories[person]!.finish(step, .accepted)
            if step.releaseAfter {
                let release = EditEvent(eventId: nextId(), type: .release, stickerId: step.stickerAfter, timestamp: now)
                let released = apply(release, by: person).isAccepted
                #expect(released, "the release after a step\n\(context)")
            }
            log.append("\(person) \(step.label): ok")

            // Another person's lock is never overridden.
            if let owner = targetBefore?.owner { #expect(owner == person, "changed a sticker \(owner) holds\n\(context)") }
            // Every sticker but the target is exactly as it was, in the same order.
            #expect(room.stickers.filter { $0.id != target } == before.filter { $0.id != target }, "\(context)")
            // The target looks as the entry says, with the lock as the person had it.
            let after = room.sticker(target)
            switch step.event.type {
            case .delete:
                #expect(after == nil, "\(context)")
            case .create:
                let look = direction == .undo ? entry.before : entry.after
                #expect(after.map(UndoHistory.Look.init) == look, "\(context)")
                #expect(after?.owner == nil, "a sticker made again is not left locked\n\(context)")
            default:
                let look = direction == .undo ? entry.before : entry.after
                #expect(after.map(UndoHistory.Look.init) == look, "\(context)")
                #expect(after?.owner == (targetBefore?.owner == person ? person : nil), "\(context)")
            }
            return true
        }

        /// n undos by `person` with nobody else acting, then a redo for each accepted undo:
        /// the room is back as it was.
        mutating func undoThenRedo(_ person: String, count: Int) {
            let start = room.stickers
            // Who each sticker is to this person's history, before undo and redo make
            // some of them again under new ids.
            let firstIds = start.map { histories[person]!.firstId(of: $0.id) }
            var accepted = 0
            for _ in 0..<count where step(.undo, by: person) == true { accepted += 1 }
            for _ in 0..<accepted {
                let redone = step(.redo, by: person)
                #expect(redone == true, "a redo right after its undo\n\(log.suffix(20).joined(separator: "\n"))")
            }
            let history = histories[person]!
            let expected = zip(start, firstIds).map { sticker, first -> Sticker in
                var sticker = sticker
                sticker.id = history.currentId(of: first)
                return sticker
            }
            let context = "\(person): \(count) undos (\(accepted) accepted), redos\n\(log.suffix(2 * count + 12).joined(separator: "\n"))"
            let current = room.stickers
            #expect(Set(current.map(\.id)) == Set(expected.map(\.id)), "\(context)")
            for sticker in expected {
                guard let found = room.sticker(sticker.id) else { continue }
                #expect(UndoHistory.Look(found) == UndoHistory.Look(sticker), "\(sticker.id)\n\(context)")
                if sticker.owner == person {
                    #expect(found.owner == person || found.owner == nil, "\(sticker.id)\n\(context)")
                } else {
                    #expect(found.owner == sticker.owner, "\(sticker.id): someone else's lock\n\(context)")
                }
            }
            let kept = Set(start.map(\.id)).intersection(current.map(\.id))
            #expect(current.map(\.id).filter(kept.contains) == start.map(\.id).filter(kept.contains), "\(context)")
        }
    }

    @Test(arguments: 1...300)
    func undoTouchesOnlyItsOwnChangeAndRedoGivesTheRoomBack(seed: Int) {
        var world = World(seed: UInt64(seed) &* 0x2545_F491_4F6C_DD1D)
        for _ in 0..<120 {
            let person = Self.people.randomElement(using: &world.rng)!
            switch Int.random(in: 0..<100, using: &world.rng) {
            case 0..<60: world.edit(person)
            case 60..<78: world.step(.undo, by: person)
            case 78..<92: world.step(.redo, by: person)
            default:
                let depth = world.histories[person]!.undoStack.count
                world.undoThenRedo(person, count: Int.random(in: 1...max(1, depth), using: &world.rng))
            }
        }
        // And once more at the end, as deep as the stack goes.
        let person = Self.people.randomElement(using: &world.rng)!
        world.undoThenRedo(person, count: max(1, world.histories[person]!.undoStack.count))
    }
}
