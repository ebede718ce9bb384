/// One entry of a user's own room list, retained by the coordinator on
/// `users/{userId}/rooms/{roomId}` (CONTRACT "Room membership"); an empty retained
/// message there means the user is no longer a member.
public struct RoomMembership: Sendable, Equatable {
    public var roomId: String
    public var role: MemberRole
    public var owner: String?
    public var invitedBy: String?
    public var since: Millis
    public var version: Int64

    public init(roomId: String, role: MemberRole, owner: String?, invitedBy: String?, since: Millis, version: Int64) {
        self.roomId = roomId
        self.role = role
        self.owner = owner
        self.invitedBy = invitedBy
        self.since = since
        self.version = version
    }

    /// Reads an entry the coordinator published.
    public static func decode(_ bytes: some Collection<UInt8>) throws(Rejection) -> RoomMembership {
        let json: JSON
        do { json = try JSON.parse(bytes) } catch { throw .invalid("\(error)") }
        guard case .object = json else { throw .invalid("a room entry must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        return RoomMembership(
            roomId: try reader.string("roomId"), role: try reader.oneOf("role", MemberRole.self),
            owner: try reader.optionalString("owner"), invitedBy: try reader.optionalString("invitedBy"),
            since: reader.has("since") ? try reader.int64("since") : 0,
            version: reader.has("version") ? try reader.int64("version") : 0)
    }
}
