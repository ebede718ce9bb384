/// One participant's view of a conversation as published, retained, at
/// `users/{user}/dm/conversations/{peer}` (CONTRACT "ConversationSnapshot").
public struct ConversationSnapshot: Sendable, Equatable {
    public let user: String
    public let peer: String
    public let epoch: String
    public let status: ConversationStatus
    public let version: Int64
    public let updatedAt: Millis
    /// Messages from the peer to the user not yet read.
    public let unread: Int
    /// The latest messages (at most ``Conversation/snapshotSize``), oldest first.
    public let messages: [DirectMessage]

    public init(
        user: String, peer: String, epoch: String, status: ConversationStatus,
        version: Int64, updatedAt: Millis, unread: Int, messages: [DirectMessage]
    ) {
        self.user = user
        self.peer = peer
        self.epoch = epoch
        self.status = status
        self.version = version
        self.updatedAt = updatedAt
        self.unread = unread
        self.messages = messages
    }

    /// The wire form, keys in the contract's order.
    public var json: JSON {
        .obj([
            "user": .string(user),
            "peer": .string(peer),
            "epoch": .string(epoch),
            "status": .string(status.rawValue),
            "version": .int(version),
            "updatedAt": .int(updatedAt),
            "unread": .int(Int64(unread)),
            "messages": .array(messages.map(\.json)),
        ])
    }

    /// Reads a snapshot leniently, for clients: unknown keys are ignored; `user`, `peer`,
    /// `status` and `version` are required; a missing `epoch` is "", a missing
    /// `updatedAt` 0, missing `messages` empty, a missing `unread` counted from the
    /// messages; a malformed message is skipped.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("a conversation snapshot must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        user = try reader.string("user")
        peer = try reader.string("peer")
        status = try reader.oneOf("status", ConversationStatus.self)
        version = try reader.int64("version")
        epoch = (try? reader.optionalString("epoch")) ?? ""
        updatedAt = reader.has("updatedAt") ? ((try? reader.int64("updatedAt")) ?? 0) : 0
        var messages: [DirectMessage] = []
        if case .array(let items)? = json["messages"] {
            for item in items {
                if let message = try? DirectMessage(json: item) { messages.append(message) }
            }
        }
        self.messages = messages
        if reader.has("unread"), let count = try? reader.int64("unread"), count >= 0 {
            unread = Int(count)
        } else {
            let peer = self.peer
            unread = messages.count { $0.sender == peer && !$0.isRead }
        }
    }

    public static func decode(_ bytes: some Collection<UInt8>) throws(Rejection) -> ConversationSnapshot {
        let json: JSON
        do throws(JSONParseError) {
            json = try JSON.parse(bytes)
        } catch {
            throw .invalid(error.description)
        }
        return try ConversationSnapshot(json: json)
    }
}
