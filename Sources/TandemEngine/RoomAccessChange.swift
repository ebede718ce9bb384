import TandemCore

/// A change of who may read a room at the broker.
public enum RoomAccessChange: Sendable, Equatable, Hashable {
    case grant(user: String, room: String)
    case revoke(user: String, room: String)

    public var user: String {
        switch self {
        case .grant(let user, _), .revoke(let user, _): user
        }
    }

    public var room: String {
        switch self {
        case .grant(_, let room), .revoke(_, let room): room
        }
    }
}
