import TandemCore

/// One page of a conversation's history, as the coordinator answers a `dmHistory`
/// request: the messages just before `before`, oldest first.
public struct DMHistoryPage: Sendable, Equatable {
    public var peer: String
    public var messages: [DirectMessage]
    public var hasMore: Bool

    public init(peer: String, messages: [DirectMessage], hasMore: Bool) {
        self.peer = peer
        self.messages = messages
        self.hasMore = hasMore
    }

    /// The request for a page (`limit` default 50, at most 200 by the protocol).
    public static func request(requestId: String, peer: String, before: Millis?, limit: Int?) -> JSON {
        var members: [JSON.Member] = [
            .init("requestId", .string(requestId)),
            .init("type", "dmHistory"),
            .init("peer", .string(peer)),
        ]
        if let before { members.append(.init("before", .int(before))) }
        if let limit { members.append(.init("limit", .int(Int64(limit)))) }
        return .object(members)
    }

    /// Reads a `dmHistory` response.
    public init(json: JSON) throws(Rejection) {
        let reader = PayloadReader(object: json)
        peer = (try? reader.string("peer")) ?? ""
        var messages: [DirectMessage] = []
        if case .array(let items)? = json["messages"] {
            for item in items { messages.append(try DirectMessage(json: item)) }
        }
        self.messages = messages
        hasMore = json["hasMore"]?.boolValue ?? false
    }
}
