import Testing
@testable import TandemCore

/// Random sequences of sticker edits and membership events (invite, remove, role, leave)
/// from several users, including ones who never belong, checked against a plain model of
/// CONTRACT "Room membership" and against the invariants the issue names: no edit of a
/// non-member or a viewer is ever applied, exactly one owner while the room is open,
/// versions grow by one per accepted event and one per lock expiry, a closed room refuses
/// everything, a member who leaves or is removed holds no lock afterwards.
@Suite struct RoomMembershipPropertyTests {
    static let users = ["alice", "bob", "carol", "dave", "erin", "frank"]
    static let lease: Millis = 10_000
    static let maxMembers = 4
    /// frank is not a broker user: inviting him is `unknown_user`.
    static let rules = MembershipRules.Context(maxMembers: maxMembers, knownUsers: Set(users.dropLast()))

    /// The membership rules as plainly as possible: a list of (user, role) in join order.
    struct Model {
        var members: [(user: String, role: MemberRole)] = []
        var exists = false
        var closed: Bool { exists && members.isEmpty }

        func role(_ user: String) -> MemberRole? { members.first { $0.user == user }?.role }

        /// The code the rules give before any sticker rule, nil when they let it through.
        func check(_ event: EditEvent, by user: String) -> ReceiptCode? {
            if !exists {
                guard event.type == .create || event.type == .invite else { return .notMember }
                if event.type == .invite {
                    if event.member == user { return .forbidden }
                    if !RoomMembershipPropertyTests.rules.knownUsers!.contains(event.member!) { return .unknownUser }
                }
                return nil
            }
            if closed { return .notMember }
            guard let role = role(user) else { return .notMember }
            switch event.type {
            case .create, .acquire, .update, .release, .delete, .restore:
                return role == .viewer ? .forbidden : nil
            case .leave:
                return nil
            case .invite, .remove, .role:
                guard role == .owner, event.member != user else { return .forbidden }
                if event.type == .invite {
                    if self.role(event.member!) != nil { return .alreadyMember }
                    if !RoomMembershipPropertyTests.rules.knownUsers!.contains(event.member!) { return .unknownUser }
                    if members.count >= RoomMembershipPropertyTests.maxMembers { return .membersFull }
                    return nil
                }
                return self.role(event.member!) == nil ? .memberNotFound : nil
            }
        }

        /// Applies a membership event the rules accepted.
        mutating func apply(_ event: EditEvent, by user: String) {
            if !exists {
                exists = true
                members = [(user, .owner)]
                if event.type == .create { return }
            }
            switch event.type {
            case .invite: members.append((event.member!, event.role ?? .editor))
            case .role: members = members.map { $0.user == event.member! ? ($0.user, event.role!) : $0 }
            case .remove: members.removeAll { $0.user == event.member! }
            case .leave:
                let wasOwner = role(user) == .owner
                members.removeAll { $0.user == user }
                if wasOwner, !members.isEmpty {
                    let heir = members.firstIndex { $0.role == .editor } ?? members.firstIndex { $0.role == .viewer }!
                    members[heir].role = .owner
                }
            default: break
            }
        }
    }

    static func events(seed: UInt64, count: Int) -> [(EditEvent, String, Millis)] {
        var rng = SplitMix64(seed: seed)
        var now: Millis = 1_000_000
        var out: [(EditEvent, String, Millis)] = []
        let membership: [EditEvent.Kind] = [.invite, .invite, .invite, .remove, .role, .leave]
        for n in 0..<count {
            now += Millis.random(in: 0...2_000, using: &rng)
            let user = users.randomElement(using: &rng)!
            let event: EditEvent
            if Int.random(in: 0..<100, using: &rng) < 35 {
                let type = membership.randomElement(using: &rng)!
                let role: MemberRole? = type == .role || Bool.random(using: &rng) ? MemberRole.grantable.randomElement(using: &rng)! : nil
                event = EditEvent(eventId: "m\(n)", type: type, member: users.randomElement(using: &rng)!, role: role, timestamp: now)
            } else {
                let type = RoomPropertyTests.stickerKinds.randomElement(using: &rng)!
                event = EditEvent(eventId: "e\(n)", type: type, stickerId: "s\(Int.random(in: 0..<8, using: &rng))", timestamp: now,
                                  image: "img", frame: Frame(x: Double(n), y: 0, width: 1, height: 1))
            }
            out.append((event, user, now))
        }
        return out
    }

    @Test(arguments: 1...60)
    func membershipFollowsTheRulesAndKeepsItsInvariants(seed: Int) {
        var room = RoomState(roomId: "r")
        var model = Model()
        var accepted: Int64 = 0
        var expiries: Int64 = 0
        for (n, (event, user, now)) in Self.events(seed: UInt64(seed), count: 600).enumerated() {
            let roleBefore = room.members.role(of: user)
            let wasClosed = room.isClosed
            let existed = room.exists
            let expected = model.check(event, by: user)
            let applied = room.apply(event, from: user, now: now, lease: Self.lease, rules: Self.rules)
            let outcome = applied.outcome
            let context = "step \(n): \(event.type) \(event.member ?? event.stickerId) by \(user)"

            if let expected {
                #expect(outcome.rejection?.code == expected, "\(context)")
            } else if event.type.isMembership {
                #expect(outcome.isAccepted, "\(context): \(outcome.rejection?.description ?? "")")
            }
            if outcome.isAccepted {
                accepted += 1
                expiries += Int64(applied.expired.count)
                if event.type.isMembership || model.exists == false { model.apply(event, by: user) }
                #expect(applied.changes.map(\.version) == Array((room.version - Int64(applied.changes.count) + 1)...room.version), "\(context): one version per change")
                if !event.type.isMembership {
                    // Never an edit of a non-member or a viewer (a create makes its sender the owner).
                    #expect(roleBefore?.mayEdit == true || (!existed && event.type == .create), "\(context)")
                }
            } else {
                #expect(applied.expired.isEmpty)
            }
            #expect(!wasClosed || !outcome.isAccepted, "\(context): a closed room refuses everything")

            // Invariants after every event.
            #expect(room.version == accepted + expiries, "\(context)")
            #expect(room.members.list.map(\.userId) == model.members.map(\.user), "\(context)")
            #expect(room.members.list.map(\.role) == model.members.map(\.role), "\(context)")
            if room.exists, !room.isClosed {
                #expect(room.members.list.count { $0.role == .owner } == 1, "\(context): exactly one owner")
            }
            #expect(room.members.count <= Self.maxMembers)
            for sticker in room.stickers {
                if let owner = sticker.owner {
                    #expect(room.members.role(of: owner)?.mayEdit == true, "\(context): \(owner) holds \(sticker.id) without editing rights")
                }
            }
            if room.isClosed { #expect(room.stickers.isEmpty) }
        }
    }

    @Test func anOwnerWhoLeavesPassesOwnershipToTheEarliestEditorThenViewer() {
        var room = RoomState(roomId: "r")
        let rules = MembershipRules.Context()
        func send(_ event: EditEvent, _ user: String) -> RoomState.Applied {
            room.apply(event, from: user, now: event.timestamp, lease: Self.lease, rules: rules)
        }
        #expect(send(EditEvent(eventId: "1", type: .invite, member: "viewer1", role: .viewer, timestamp: 1), "alice").outcome.isAccepted)
        #expect(send(EditEvent(eventId: "2", type: .invite, member: "bob", timestamp: 2), "alice").outcome.isAccepted)
        #expect(send(EditEvent(eventId: "3", type: .invite, member: "carol", timestamp: 3), "alice").outcome.isAccepted)
        #expect(room.version == 3 && room.members.owner == "alice")
        let leave = send(EditEvent(eventId: "4", type: .leave, member: nil, timestamp: 4), "alice")
        #expect(leave.outcome.change?.newOwner == "bob")
        #expect(room.members.owner == "bob" && room.version == 4)
        _ = send(EditEvent(eventId: "5", type: .leave, member: nil, timestamp: 5), "bob")
        #expect(room.members.owner == "carol")
        _ = send(EditEvent(eventId: "6", type: .leave, member: nil, timestamp: 6), "carol")
        #expect(room.members.owner == "viewer1" && room.members.count == 1)
        _ = send(EditEvent(eventId: "7", type: .leave, member: nil, timestamp: 7), "viewer1")
        #expect(room.isClosed && room.version == 7)
        let late = send(EditEvent(eventId: "8", type: .create, stickerId: "s", timestamp: 8, image: "a", frame: Frame(x: 0, y: 0, width: 1, height: 1)), "alice")
        #expect(late.outcome.rejection?.code == .notMember && late.outcome.version == 7)
    }

    @Test func aRemovedMemberLosesItsLocksInTheSameStepBeforeItsRemoval() {
        var room = RoomState(roomId: "r")
        let rules = MembershipRules.Context()
        let frame = Frame(x: 0, y: 0, width: 1, height: 1)
        _ = room.apply(EditEvent(eventId: "1", type: .invite, member: "bob", timestamp: 1), from: "alice", now: 1, lease: Self.lease, rules: rules)
        _ = room.apply(EditEvent(eventId: "2", type: .create, stickerId: "a", timestamp: 2, image: "x", frame: frame), from: "bob", now: 2, lease: Self.lease, rules: rules)
        _ = room.apply(EditEvent(eventId: "3", type: .create, stickerId: "b", timestamp: 3, image: "x", frame: frame), from: "bob", now: 3, lease: Self.lease, rules: rules)
        let removed = room.apply(EditEvent(eventId: "4", type: .remove, member: "bob", timestamp: 4), from: "alice", now: 4, lease: Self.lease, rules: rules)
        #expect(removed.changes.map(\.type) == [.expire, .expire, .remove])
        #expect(removed.changes.map(\.version) == [4, 5, 6])
        #expect(room.stickers.allSatisfy { $0.owner == nil } && room.nextLeaseDeadline == nil)
        #expect(removed.outcome.version == 6)
    }
}
