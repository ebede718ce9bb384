/// A member's role in a room (CONTRACT "Room membership"): exactly one `owner`; editors
/// edit under the sticker rules; viewers only read.
public enum MemberRole: String, Sendable, CaseIterable, Comparable {
    case owner, editor, viewer

    /// The roles an `invite` or `role` event may give (the owner is never given, only
    /// passed on when the owner leaves).
    public static let grantable: [MemberRole] = [.editor, .viewer]

    public var mayEdit: Bool { self != .viewer }

    /// owner < editor < viewer: the order ownership passes in.
    public static func < (a: MemberRole, b: MemberRole) -> Bool {
        a.rank < b.rank
    }

    private var rank: Int {
        switch self {
        case .owner: 0
        case .editor: 1
        case .viewer: 2
        }
    }
}

/// One member of a room.
public struct RoomMember: Sendable, Equatable {
    public var userId: String
    public var role: MemberRole
    /// The timestamp of the event that made them a member.
    public var since: Millis
    /// Who invited them; nil for the room's creator (and members of rooms that existed
    /// before membership, filled by the upgrade).
    public var invitedBy: String?

    public init(userId: String, role: MemberRole, since: Millis, invitedBy: String?) {
        self.userId = userId
        self.role = role
        self.since = since
        self.invitedBy = invitedBy
    }

    /// `{"userId","role","since"}`: the snapshot's member entry.
    public func json() -> JSON {
        .obj(["userId": .string(userId), "role": .string(role.rawValue), "since": .int(since)])
    }

    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("member must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        userId = try reader.string("userId")
        role = try reader.oneOf("role", MemberRole.self)
        since = reader.has("since") ? try reader.int64("since") : 0
        invitedBy = try reader.optionalString("invitedBy")
    }
}

/// Who belongs to a room, in the order they joined: a pure value with the contract's
/// membership rules. A room with no members after it existed is closed.
public struct RoomMembers: Sendable, Equatable {
    /// In the order they joined.
    public private(set) var list: [RoomMember]

    public init(_ list: [RoomMember] = []) {
        self.list = list
    }

    public var isEmpty: Bool { list.isEmpty }
    public var count: Int { list.count }

    public var owner: String? { list.first { $0.role == .owner }?.userId }

    public func member(_ userId: String) -> RoomMember? {
        list.first { $0.userId == userId }
    }

    public func role(of userId: String) -> MemberRole? {
        member(userId)?.role
    }

    public func contains(_ userId: String) -> Bool { member(userId) != nil }

    // MARK: Changes (the caller has checked the rules: `MembershipRules`)

    mutating func add(_ member: RoomMember) {
        list.append(member)
    }

    mutating func setRole(_ role: MemberRole, of userId: String) {
        if let index = list.firstIndex(where: { $0.userId == userId }) { list[index].role = role }
    }

    /// Removes `userId`; when it was the owner, ownership passes to the member who joined
    /// earliest, editors before viewers. Returns the new owner, if ownership passed.
    @discardableResult
    mutating func remove(_ userId: String) -> String? {
        guard let index = list.firstIndex(where: { $0.userId == userId }) else { return nil }
        let wasOwner = list[index].role == .owner
        list.remove(at: index)
        guard wasOwner, !list.isEmpty else { return nil }
        let heir = list.indices.min { a, b in
            list[a].role != list[b].role ? list[a].role < list[b].role : a < b
        }!
        list[heir].role = .owner
        return list[heir].userId
    }

    /// Checks the sanity a restart relies on: unique ids, exactly one owner unless empty.
    public func validate() throws(Rejection) {
        var seen = Set<String>()
        for member in list where !seen.insert(member.userId).inserted {
            throw .invalid("\(member.userId) is a member twice")
        }
        let owners = list.count { $0.role == .owner }
        guard list.isEmpty || owners == 1 else { throw .invalid("a room has \(owners) owners") }
    }
}

/// The contract's membership rules for one event against a room's members (CONTRACT
/// "Room membership"), shared by the coordinator's `RoomState` and the client's replica.
/// Checks run in the order docs/PROTOCOL.md gives: membership of the sender, its role,
/// then the target.
public enum MembershipRules {
    /// What the coordinator knows beside the room: the member limit, and the broker's
    /// users when it administers them (nil: not known, every user may be invited).
    public struct Context: Sendable {
        public var maxMembers: Int
        public var knownUsers: Set<String>?

        public init(maxMembers: Int = 8, knownUsers: Set<String>? = nil) {
            self.maxMembers = maxMembers
            self.knownUsers = knownUsers
        }
    }

    /// nil when `user` may send `event` to a room with `members` (an existing, open room);
    /// else the rejection. Sticker events that pass still meet the sticker rules.
    static func check(_ event: EditEvent, members: RoomMembers, from user: String, context: Context) -> Rejection? {
        guard let role = members.role(of: user) else {
            return Rejection(.notMember, "\(user) is not a member of this room")
        }
        switch event.type {
        case .create, .acquire, .update, .release, .delete, .restore:
            return role.mayEdit ? nil : Rejection(.forbidden, "\(user) is a viewer of this room and may not edit it")
        case .leave:
            return nil
        case .invite, .remove, .role:
            guard role == .owner else {
                return Rejection(.forbidden, "only the owner may \(event.type.rawValue) members")
            }
            let target = event.member ?? ""
            if target == user {
                return Rejection(.forbidden, "the owner cannot \(event.type.rawValue) itself")
            }
            if event.type == .invite {
                if members.contains(target) { return Rejection(.alreadyMember, "\(target) is already a member") }
                return checkInvitee(target, members: members, context: context)
            }
            guard members.contains(target) else { return Rejection(.memberNotFound, "\(target) is not a member of this room") }
            return nil
        }
    }

    /// The checks an invitee meets, in a room that exists or is being made by the invite.
    static func checkInvitee(_ target: String, members: RoomMembers, context: Context) -> Rejection? {
        if let known = context.knownUsers, !known.contains(target) {
            return Rejection(.unknownUser, "the broker has no user \(target)")
        }
        if members.count >= context.maxMembers {
            return Rejection(.membersFull, "the room has \(members.count) members, the most it may (owner included)")
        }
        return nil
    }
}

extension RoomMembers {
    /// The store's rows for these members of `roomId`, in the order they joined.
    public func rows(roomId: String) -> [RoomMemberRow] {
        list.enumerated().map { position, member in
            RoomMemberRow(roomId: roomId, userId: member.userId, role: member.role.rawValue, since: member.since,
                          invitedBy: member.invitedBy, position: position)
        }
    }

    /// Members from the store's rows of one room (in any order); throws on a row that
    /// cannot be right (an unknown role, a user twice, not exactly one owner).
    public init(rows: [RoomMemberRow]) throws(Rejection) {
        var list: [RoomMember] = []
        for row in rows.sorted(by: { $0.position < $1.position }) {
            guard let role = MemberRole(rawValue: row.role) else {
                throw .invalid("room \(row.roomId): member \(row.userId) has the unknown role \(row.role)")
            }
            list.append(RoomMember(userId: row.userId, role: role, since: row.since, invitedBy: row.invitedBy))
        }
        self.init(list)
        try validate()
    }
}
