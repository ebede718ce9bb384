import TandemCore

/// An invite of `member` (as an editor unless said) into a room, as its owner publishes it.
func invitePayload(_ id: String, member: String, role: String? = nil, at timestamp: Millis) -> [UInt8] {
    var members: [JSON.Member] = [
        .init("eventId", .string(id)), .init("type", "invite"), .init("member", .string(member)), .init("timestamp", .int(timestamp)),
    ]
    if let role { members.append(.init("role", .string(role))) }
    return JSON.object(members).serialized()
}
