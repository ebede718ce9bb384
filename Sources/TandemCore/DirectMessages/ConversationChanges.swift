/// One accepted command's change to a conversation view, as ConversationChanges carries
/// it (CONTRACT "Direct messages").
public struct ConversationChange: Sendable, Equatable {
    /// The conversation's version after this command.
    public var version: Int64
    public var commandId: String
    public var sender: String
    public var type: DMCommand.Kind
    /// The messages the command added or changed, as they are after it: the new message
    /// of a `message` (or of a request with text), the copies now read of a `read`.
    public var messages: [DirectMessage]

    public init(version: Int64, commandId: String, sender: String, type: DMCommand.Kind, messages: [DirectMessage]) {
        self.version = version
        self.commandId = commandId
        self.sender = sender
        self.type = type
        self.messages = messages
    }

    public var json: JSON {
        .obj([
            "version": .int(version),
            "commandId": .string(commandId),
            "sender": .string(sender),
            "type": .string(type.rawValue),
            "messages": .array(messages.map(\.json)),
        ])
    }

    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("a change must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        version = try reader.int64("version")
        commandId = try reader.string("commandId")
        sender = try reader.string("sender")
        type = try reader.oneOf("type", DMCommand.Kind.self)
        var messages: [DirectMessage] = []
        if case .array(let items)? = json["messages"] {
            for item in items { messages.append(try DirectMessage(json: item)) }
        }
        self.messages = messages
    }
}

/// The changes of one batch to one participant's view of a conversation, published (not
/// retained) on `users/{user}/dm/conversations/{peer}/changes` before any snapshot of
/// that batch. A client at `fromVersion` applies it; on a gap it takes the next snapshot.
public struct ConversationChanges: Sendable, Equatable {
    public var user: String
    public var peer: String
    public var epoch: String
    public var fromVersion: Int64
    public var toVersion: Int64
    /// The view's status after the last change.
    public var status: ConversationStatus
    /// The view's unread count after the last change.
    public var unread: Int
    public var changes: [ConversationChange]

    public init(
        user: String, peer: String, epoch: String, fromVersion: Int64, toVersion: Int64,
        status: ConversationStatus, unread: Int, changes: [ConversationChange]
    ) {
        self.user = user
        self.peer = peer
        self.epoch = epoch
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.status = status
        self.unread = unread
        self.changes = changes
    }

    /// `{"user","peer","epoch","fromVersion","toVersion","status","unread","changes":[...]}`.
    public var json: JSON {
        .obj([
            "user": .string(user),
            "peer": .string(peer),
            "epoch": .string(epoch),
            "fromVersion": .int(fromVersion),
            "toVersion": .int(toVersion),
            "status": .string(status.rawValue),
            "unread": .int(Int64(unread)),
            "changes": .array(changes.map(\.json)),
        ])
    }

    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("conversation changes must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        user = try reader.string("user")
        peer = try reader.string("peer")
        epoch = try reader.string("epoch")
        fromVersion = try reader.int64("fromVersion")
        toVersion = try reader.int64("toVersion")
        status = try reader.oneOf("status", ConversationStatus.self)
        let unread = try reader.int64("unread")
        guard unread >= 0 else { throw .invalid("unread must not be negative") }
        self.unread = Int(unread)
        guard case .array(let items)? = json["changes"] else { throw .invalid("changes must be an array") }
        var changes: [ConversationChange] = []
        changes.reserveCapacity(items.count)
        for item in items { changes.append(try ConversationChange(json: item)) }
        self.changes = changes
    }

    /// Reads a ConversationChanges the coordinator published.
    public static func decode(_ bytes: some Collection<UInt8>) throws(Rejection) -> ConversationChanges {
        let json: JSON
        do throws(JSONParseError) {
            json = try JSON.parse(bytes)
        } catch {
            throw .invalid(error.description)
        }
        return try ConversationChanges(json: json)
    }
}
