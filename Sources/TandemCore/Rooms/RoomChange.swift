/// One accepted event, lock expiry or membership change, as a RoomChanges message
/// lists it.
public struct RoomChange: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case create, acquire, update, release, delete, expire
        case invite, remove, role, leave
        /// The room back as it was right after `restoredFrom`: `stickers` is the whole list.
        case restore

        public var isMembership: Bool {
            switch self {
            case .invite, .remove, .role, .leave: true
            case .create, .acquire, .update, .release, .delete, .expire, .restore: false
            }
        }
    }

    /// The room's version right after this change.
    public var version: Int64
    /// nil for an expiry.
    public var eventId: String?
    /// The sender; nil for an expiry.
    public var userId: String?
    public var type: Kind
    /// "" for a membership change (written as null).
    public var stickerId: String
    /// The sticker after the change; nil after a delete and for membership changes.
    public var sticker: Sticker?
    /// Membership changes: the member it is about.
    public var member: String?
    /// Membership changes: the member's role after an invite or role change, the role it
    /// had for a remove or leave; `owner` for the member ownership passed to (a `role`
    /// change with no event id or user, after the owner left).
    public var role: MemberRole?
    /// A leave of the owner: who ownership passed to (written as `"owner"`).
    public var newOwner: String?
    /// A restore: the version the room was restored to.
    public var restoredFrom: Int64?
    /// A restore: every sticker after it, in creation order.
    public var stickers: [Sticker]?

    public init(version: Int64, eventId: String?, userId: String?, type: Kind, stickerId: String, sticker: Sticker?) {
        self.version = version
        self.eventId = eventId
        self.userId = userId
        self.type = type
        self.stickerId = stickerId
        self.sticker = sticker
    }

    /// A membership change.
    public init(version: Int64, eventId: String?, userId: String?, type: Kind, member: String, role: MemberRole) {
        self.init(version: version, eventId: eventId, userId: userId, type: type, stickerId: "", sticker: nil)
        self.member = member
        self.role = role
    }

    /// A restore: the room's stickers became `stickers`, as they were right after `from`.
    public init(version: Int64, eventId: String, userId: String, restoredFrom from: Int64, stickers: [Sticker]) {
        self.init(version: version, eventId: eventId, userId: userId, type: .restore, stickerId: "", sticker: nil)
        restoredFrom = from
        self.stickers = stickers
    }

    /// `{"version","eventId","userId","type","stickerId","sticker"}`, nulls written out;
    /// a membership change adds `"member","role"`, with `stickerId` and `sticker` null;
    /// a restore adds `"restoredFrom","stickers"`, with `stickerId` and `sticker` null.
    public func json() -> JSON {
        let namesSticker = !type.isMembership && type != .restore
        var members: [JSON.Member] = [
            .init("version", .int(version)),
            .init("eventId", JSON(eventId)),
            .init("userId", JSON(userId)),
            .init("type", .string(type.rawValue)),
            .init("stickerId", namesSticker ? .string(stickerId) : .null),
            .init("sticker", namesSticker ? sticker?.json() ?? .null : .null),
        ]
        if type == .restore {
            members.append(.init("restoredFrom", restoredFrom.map(JSON.int) ?? .null))
            members.append(.init("stickers", .array((stickers ?? []).map { $0.json() })))
        } else if type.isMembership {
            members.append(.init("member", JSON(member)))
            members.append(.init("role", JSON(role?.rawValue)))
            if let newOwner { members.append(.init("owner", .string(newOwner))) }
        }
        return .object(members)
    }

    /// Reads a change the coordinator wrote.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("change must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        version = try reader.int64("version")
        eventId = try reader.optionalString("eventId")
        userId = try reader.optionalString("userId")
        type = try reader.oneOf("type", Kind.self)
        stickerId = try reader.optionalString("stickerId") ?? ""
        member = try reader.optionalString("member")
        role = reader.has("role") ? try reader.oneOf("role", MemberRole.self) : nil
        newOwner = type == .leave ? try reader.optionalString("owner") : nil
        if type == .restore {
            restoredFrom = try reader.int64("restoredFrom")
            guard case .array(let items)? = json["stickers"] else { throw .invalid("stickers must be an array") }
            var list: [Sticker] = []
            list.reserveCapacity(items.count)
            for item in items { list.append(try Sticker(json: item)) }
            stickers = list
        }
        if let value = json["sticker"], !value.isNull {
            sticker = try Sticker(json: value)
        } else {
            sticker = nil
        }
    }
}
