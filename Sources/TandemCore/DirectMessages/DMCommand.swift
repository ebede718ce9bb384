/// One command a user publishes on `users/{userId}/dm/commands` (CONTRACT "Direct messages").
///
/// The sender is not part of the command: it is the `{userId}` level of the topic.
public struct DMCommand: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case request, accept, decline, message, read, leave
    }

    public let commandId: String
    public let type: Kind
    /// The other participant.
    public let peer: String
    public var timestamp: Millis
    /// Required for `message`, optional for `request`, ignored for the others.
    public let text: String?

    public init(commandId: String, type: Kind, peer: String, timestamp: Millis, text: String? = nil) {
        self.commandId = commandId
        self.type = type
        self.peer = peer
        self.timestamp = timestamp
        self.text = text
    }

    /// Reads a DMCommand payload. The failure's id is the commandId when a valid one
    /// could be read, else "".
    public static func decode(_ bytes: some Collection<UInt8>) throws(DecodeFailure) -> DMCommand {
        try PayloadReader.decode(bytes, idSource: .field("commandId")) { (reader) throws(Rejection) in try decode(reader) }
    }

    static func decode(_ reader: PayloadReader) throws(Rejection) -> DMCommand {
        let commandId = try reader.identifier("commandId")
        let type = try reader.oneOf("type", Kind.self)
        let peer = try reader.identifier("peer")
        let timestamp = try reader.int64("timestamp")
        var text: String?
        switch type {
        case .message:
            text = try reader.string("text")
        case .request:
            text = try reader.optionalString("text")
        case .accept, .decline, .read, .leave:
            text = nil
        }
        if let text {
            let size = text.utf8.count
            guard size <= WireLimits.maxDMTextBytes else {
                throw .invalid("text is \(size) bytes; the limit is \(WireLimits.maxDMTextBytes)")
            }
        }
        return DMCommand(commandId: commandId, type: type, peer: peer, timestamp: timestamp, text: text)
    }

    /// The wire form, as a client publishes it.
    public var json: JSON {
        var members: [JSON.Member] = [
            .init("commandId", .string(commandId)),
            .init("type", .string(type.rawValue)),
            .init("peer", .string(peer)),
            .init("timestamp", .int(timestamp)),
        ]
        if let text { members.append(.init("text", .string(text))) }
        return .object(members)
    }
}
