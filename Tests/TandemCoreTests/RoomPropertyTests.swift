import Testing
@testable import TandemCore

/// Random interleavings of events from several users, lease expiries and presence
/// expiries, checked against a deliberately naive model of the contract's rules and
/// against invariants that must hold whatever happens.
@Suite struct RoomPropertyTests {
    static let users = ["alice", "bob", "carol"]
    static let lease: Millis = 10_000
    /// The sticker rules alone (membership: RoomMembershipPropertyTests; a restore changes
    /// the whole room, not one sticker).
    static let stickerKinds = EditEvent.Kind.allCases.filter(\.namesSticker)

    /// The contract's rules written as plainly as possible, with linear scans.
    struct Model {
        var order: [String] = []
        var owner: [String: String] = [:]
        var deleted: Set<String> = []
        var deadline: [String: Millis] = [:]
        var version: Int64 = 0

        mutating func apply(_ type: EditEvent.Kind, _ id: String, by user: String, now: Millis) -> ReceiptCode? {
            let live = order.contains(id)
            if type == .create {
                if deleted.contains(id) { return .deleted }
                if live { return .alreadyExists }
                order.append(id)
                take(id, user, now)
                return nil
            }
            if deleted.contains(id) { return .deleted }
            if !live { return .notFound }
            let current = owner[id]
            switch type {
            case .acquire, .update:
                if let current, current != user { return .ownedByOther }
                take(id, user, now)
            case .release:
                guard current == user else { return .notOwner }
                owner[id] = nil
                deadline[id] = nil
                version += 1
            case .delete:
                if let current, current != user { return .ownedByOther }
                order.removeAll { $0 == id }
                deleted.insert(id)
                owner[id] = nil
                deadline[id] = nil
                version += 1
            case .create, .invite, .remove, .role, .leave, .restore:
                break
            }
            return nil
        }

        mutating func take(_ id: String, _ user: String, _ now: Millis) {
            owner[id] = user
            deadline[id] = now + RoomPropertyTests.lease
            version += 1
        }

        mutating func expireLeases(now: Millis) -> [String] {
            // Earliest first; ties in creation order.
            let due = order.filter { deadline[$0].map { $0 <= now } ?? false }.enumerated().sorted {
                deadline[$0.element]! != deadline[$1.element]! ? deadline[$0.element]! < deadline[$1.element]! : $0.offset < $1.offset
            }.map(\.element)
            for id in due { release(id) }
            return due
        }

        mutating func expireLocks(of user: String) -> [String] {
            let due = order.filter { owner[$0] == user }
            for id in due { release(id) }
            return due
        }

        mutating func release(_ id: String) {
            owner[id] = nil
            deadline[id] = nil
            version += 1
        }
    }

    enum Step {
        case event(EditEvent, user: String, now: Millis)
        case expireLeases(now: Millis)
        case expireLocks(user: String, now: Millis)
    }

    static func steps(seed: UInt64, count: Int) -> [Step] {
        var rng = SplitMix64(seed: seed)
        var now: Millis = 1_000_000
        var steps: [Step] = []
        for n in 0..<count {
            now += Millis.random(in: 0...3_000, using: &rng)
            let roll = Int.random(in: 0..<100, using: &rng)
            if roll < 8 {
                steps.append(.expireLeases(now: now))
            } else if roll < 11 {
                steps.append(.expireLocks(user: users.randomElement(using: &rng)!, now: now))
            } else {
                let type = Self.stickerKinds.randomElement(using: &rng)!
                // A sliding pool of ids: fresh ones keep coming as deleted ones stay deleted.
                let id = "s\(n / 40 + Int.random(in: 0..<6, using: &rng))"
                let frame = Frame(x: Double(n), y: 0, width: 1, height: 1)
                let event = EditEvent(eventId: "e\(n)", type: type, stickerId: id, timestamp: now - Millis.random(in: 0...50, using: &rng), image: "img", frame: frame)
                steps.append(.event(event, user: users.randomElement(using: &rng)!, now: now))
            }
        }
        return steps
    }

    /// Runs the steps on a room, returning every change it made.
    static func run(_ steps: [Step], on room: inout RoomState) -> [RoomChange] {
        var changes: [RoomChange] = []
        for step in steps {
            switch step {
            case .event(let event, let user, let now):
                if let change = room.apply(event, from: user, now: now, lease: lease).change { changes.append(change) }
            case .expireLeases(let now):
                changes += room.expireLeases(now: now)
            case .expireLocks(let user, let now):
                changes += room.expireLocks(ownedBy: user, now: now)
            }
        }
        return changes
    }

    @Test(arguments: 1...40)
    func followsTheRulesAndKeepsItsInvariants(seed: Int) throws {
        var room = RoomState(roomId: "r")
        var model = Model()
        var accepted: Int64 = 0
        var expiries: Int64 = 0
        var senders: [String: Set<String>] = [:]
        var tombstoned: Set<String> = []

        for (n, step) in Self.steps(seed: UInt64(seed), count: 1_500).enumerated() {
            switch step {
            case .event(let event, let user, let now):
                let ownerBefore = room.sticker(event.stickerId)?.owner
                let outcome = room.apply(event, from: user, now: now, lease: Self.lease)
                let expected = model.apply(event.type, event.stickerId, by: user, now: now)
                #expect(outcome.rejection?.code == expected, "step \(n): \(event.type) \(event.stickerId) by \(user)")
                if tombstoned.contains(event.stickerId) { #expect(outcome.rejection?.code == .deleted) }
                if let change = outcome.change {
                    accepted += 1
                    senders[event.stickerId, default: []].insert(user)
                    #expect(change.version == room.version)
                    if event.type == .update || event.type == .acquire || event.type == .delete {
                        #expect(ownerBefore == nil || ownerBefore == user, "only the owner (or anyone when unowned) may \(event.type)")
                    }
                    if event.type == .delete { tombstoned.insert(event.stickerId) }
                } else {
                    #expect(outcome.version == (room.version == 0 ? nil : room.version))
                }
            case .expireLeases(let now):
                let changes = room.expireLeases(now: now)
                #expect(changes.map(\.stickerId) == model.expireLeases(now: now))
                expiries += Int64(changes.count)
            case .expireLocks(let user, let now):
                let changes = room.expireLocks(ownedBy: user, now: now)
                #expect(changes.map(\.stickerId) == model.expireLocks(of: user))
                expiries += Int64(changes.count)
            }

            // Invariants after every step.
            #expect(room.version == accepted + expiries)
            #expect(room.version == model.version)
            #expect(room.stickers.map(\.id) == model.order)
            for sticker in room.stickers {
                #expect(sticker.owner == model.owner[sticker.id])
                if let owner = sticker.owner { #expect(senders[sticker.id]?.contains(owner) == true) }
                #expect((sticker.owner != nil) == (room.leaseDeadline(of: sticker.id) != nil))
            }
            #expect(room.leaseDeadlines == model.deadline)
            #expect(room.nextLeaseDeadline == model.deadline.values.min())
            #expect(tombstoned.isDisjoint(with: room.stickers.map(\.id)))
            #expect(room.tombstones == tombstoned)

            // Now and then, go on from a restored copy (either format): it must be
            // indistinguishable.
            if n % 97 == 0 {
                let restored = n % 2 == 0
                    ? try RoomState(persistedBytes: room.persistedBytes())
                    : try RoomState(persisted: JSON.parse(room.persisted().text))
                #expect(restored == room)
                room = restored
            }
        }
        // The run exercised what it claims to.
        #expect(accepted > 100 && expiries > 10 && tombstoned.count > 10, "accepted \(accepted), expiries \(expiries), deleted \(tombstoned.count)")
    }

    @Test(arguments: 1...20)
    func theSameOrderedEventsGiveTheSameState(seed: Int) throws {
        let steps = Self.steps(seed: UInt64(seed) &+ 1_000, count: 1_000)
        var first = RoomState(roomId: "r")
        var second = RoomState(roomId: "r")
        let firstChanges = Self.run(steps, on: &first)
        let secondChanges = Self.run(steps, on: &second)
        #expect(first == second)
        #expect(firstChanges == secondChanges)
        #expect(first.snapshot(epoch: "e").json().text == second.snapshot(epoch: "e").json().text)
        #expect(first.persisted().text == second.persisted().text)
        #expect(first.persistedBytes() == second.persistedBytes())
        // Versions in the changes run 1, 2, 3, ... with no gap.
        #expect(firstChanges.map(\.version) == (0..<firstChanges.count).map { Int64($0) + 1 })
    }

    /// Many stickers, many deletions: compaction must keep positions right.
    @Test(arguments: 1...5)
    func compactionKeepsOrderAndIndex(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed))
        var room = RoomState(roomId: "r")
        var expected: [String] = []
        for i in 0..<3_000 {
            if !expected.isEmpty, Int.random(in: 0..<3, using: &rng) == 0 {
                let id = expected.remove(at: Int.random(in: 0..<expected.count, using: &rng))
                #expect(room.must(.delete, id, by: "alice") != nil)
            } else {
                room.must(.create, "k\(i)", by: "alice")
                expected.append("k\(i)")
            }
        }
        #expect(room.stickers.map(\.id) == expected)
        for id in expected.shuffled(using: &rng).prefix(100) {
            #expect(room.must(.update, id, by: "alice")?.sticker?.id == id)
        }
    }
}
