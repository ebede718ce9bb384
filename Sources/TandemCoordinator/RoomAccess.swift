/// Who may read a room through the broker: the projection of room membership the
/// coordinator keeps in the broker's access rules (`BrokerAccessAdmin`).
public enum RoomAccessChange: Sendable, Equatable, Hashable {
    case grant(user: String, room: String)
    case revoke(user: String, room: String)
}
