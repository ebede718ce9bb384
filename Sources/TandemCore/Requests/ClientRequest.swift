/// A query a client asks the coordinator on `users/{userId}/requests`, answered on
/// `users/{userId}/responses`. Queries read the database; they change nothing, get no
/// receipt, and are not deduplicated (asking twice gets two answers).
public struct ClientRequest: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        /// Older DM messages than the snapshot holds.
        case dmHistory
        /// Finished workouts with their summaries.
        case logbook
        /// One conversation's changes since a version: how a client fills a gap in one
        /// round trip. Answered from the coordinator's memory, not the store.
        case dmChanges
        /// A room's changes, newest first, and the oldest version a restore can reach
        /// (CONTRACT "Room history, restore and cursors").
        case roomHistory
    }

    public static let defaultLimit = 50
    public static let maxLimit = 200

    public var requestId: String
    public var kind: Kind
    /// dmHistory: the other participant.
    public var peer: String?
    /// dmHistory: only messages sent strictly before this time; roomHistory: only
    /// changes with a version below this one.
    public var before: Millis?
    /// roomHistory: the room.
    public var roomId: String?
    public var limit: Int
    /// dmChanges: the version the client holds.
    public var since: Int64?
    /// dmChanges: the epoch of the version the client holds (another epoch: a snapshot).
    public var epoch: String?

    public init(
        requestId: String, kind: Kind, peer: String? = nil, before: Millis? = nil, limit: Int = ClientRequest.defaultLimit,
        since: Int64? = nil, epoch: String? = nil, roomId: String? = nil
    ) {
        self.roomId = roomId
        self.requestId = requestId
        self.kind = kind
        self.peer = peer
        self.before = before
        self.limit = limit
        self.since = since
        self.epoch = epoch
    }

    public static func decode(_ bytes: some Collection<UInt8>) throws(DecodeFailure) -> ClientRequest {
        try PayloadReader.decode(bytes, idSource: .field("requestId")) { (reader) throws(Rejection) in
            let requestId = try reader.identifier("requestId")
            let kind = try reader.oneOf("type", Kind.self)
            var request = ClientRequest(requestId: requestId, kind: kind)
            if reader.has("limit") {
                let limit = try reader.int64("limit")
                guard (1...Int64(maxLimit)).contains(limit) else { throw Rejection.invalid("limit must be between 1 and \(maxLimit)") }
                request.limit = Int(limit)
            }
            if kind == .dmHistory {
                request.peer = try reader.identifier("peer")
                if reader.has("before") { request.before = try reader.int64("before") }
            }
            if kind == .roomHistory {
                request.roomId = try reader.identifier("roomId")
                if reader.has("before") { request.before = try reader.int64("before") }
            }
            if kind == .dmChanges {
                request.peer = try reader.identifier("peer")
                let since = try reader.int64("since")
                guard since >= 0 else { throw Rejection.invalid("since must not be negative") }
                request.since = since
                if reader.has("epoch") { request.epoch = try reader.string("epoch") }
            }
            return request
        }
    }

    public var json: JSON {
        var members: [JSON.Member] = [.init("requestId", .string(requestId)), .init("type", .string(kind.rawValue))]
        if let roomId { members.append(.init("roomId", .string(roomId))) }
        if let peer { members.append(.init("peer", .string(peer))) }
        if let before { members.append(.init("before", .int(before))) }
        if let since { members.append(.init("since", .int(since))) }
        if let epoch { members.append(.init("epoch", .string(epoch))) }
        if kind != .dmChanges { members.append(.init("limit", .int(Int64(limit)))) }
        return .object(members)
    }

    /// The error answer: `{"requestId","type","error":{"code","message"}}`.
    public static func errorResponse(requestId: String, kind: String?, _ rejection: Rejection) -> JSON {
        .obj([
            "requestId": .string(requestId),
            "type": JSON(kind),
            "error": .obj(["code": .string(rejection.code.rawValue), "message": .string(rejection.message)]),
        ])
    }
}
