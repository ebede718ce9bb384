/// One message of a conversation. Never edited in place: reading makes a new copy.
public struct DirectMessage: Sendable, Equatable {
    /// The commandId that sent it.
    public let id: String
    public let sender: String
    public let text: String
    /// The sending command's timestamp.
    public let sentAt: Millis
    public let isRead: Bool

    public init(id: String, sender: String, text: String, sentAt: Millis, isRead: Bool = false) {
        self.id = id
        self.sender = sender
        self.text = text
        self.sentAt = sentAt
        self.isRead = isRead
    }

    /// The same message, read.
    public func markedRead() -> DirectMessage {
        DirectMessage(id: id, sender: sender, text: text, sentAt: sentAt, isRead: true)
    }

    /// The form used in ConversationSnapshot's `messages`.
    public var json: JSON {
        .obj([
            "id": .string(id),
            "sender": .string(sender),
            "text": .string(text),
            "sentAt": .int(sentAt),
            "isRead": .bool(isRead),
        ])
    }

    /// Reads the snapshot form. `isRead` defaults to false when absent.
    public init(json: JSON) throws(Rejection) {
        let reader = PayloadReader(object: json)
        guard case .object = json else { throw .invalid("a message must be an object, not \(json.typeName)") }
        id = try reader.string("id")
        sender = try reader.string("sender")
        text = try reader.string("text")
        sentAt = try reader.int64("sentAt")
        if reader.has("isRead") {
            guard let b = json["isRead"]?.boolValue else { throw .invalid("isRead must be a boolean") }
            isRead = b
        } else {
            isRead = false
        }
    }
}
