import TandemCore

/// One page of a room's history, as the coordinator answers a `roomHistory` query
/// (CONTRACT "Room history, restore and cursors"): the changes below a version, newest
/// first, with what a restore may reach.
public struct RoomHistoryAnswer: Sendable, Equatable {
    /// One change of the room: an accepted event, a lock expiry or a restore.
    public struct Entry: Sendable, Equatable {
        /// The room's version right after this change: what a restore names.
        public var version: Int64
        /// nil for a lock expiry.
        public var eventId: String?
        /// Who sent it; nil for a lock expiry.
        public var userId: String?
        public var type: RoomChange.Kind
        /// nil for membership changes and restores.
        public var stickerId: String?
        /// The event's timestamp (after ordering), or an expiry's time.
        public var timestamp: Millis

        public init(version: Int64, eventId: String?, userId: String?, type: RoomChange.Kind, stickerId: String?, timestamp: Millis) {
            self.version = version
            self.eventId = eventId
            self.userId = userId
            self.type = type
            self.stickerId = stickerId
            self.timestamp = timestamp
        }

        /// Reads one entry of a response's `entries`.
        public init(json: JSON) throws(Rejection) {
            guard case .object = json else { throw .invalid("a history entry must be an object, not \(json.typeName)") }
            let reader = PayloadReader(object: json)
            version = try reader.int64("version")
            eventId = try reader.optionalString("eventId")
            userId = try reader.optionalString("userId")
            type = try reader.oneOf("type", RoomChange.Kind.self)
            stickerId = try reader.optionalString("stickerId")
            timestamp = reader.has("timestamp") ? try reader.int64("timestamp") : 0
        }

        /// The entry as the response holds it.
        public var json: JSON {
            .object([
                .init("version", .int(version)),
                .init("eventId", JSON(eventId)),
                .init("userId", JSON(userId)),
                .init("type", .string(type.rawValue)),
                .init("stickerId", JSON(stickerId)),
                .init("timestamp", .int(timestamp)),
            ])
        }
    }

    public var roomId: String
    /// The epoch the versions belong to (a restore names a version of this epoch).
    public var epoch: String
    /// The room's current version.
    public var version: Int64
    /// The oldest version a restore can still reach; older ones are `history_gone`.
    public var oldest: Int64
    /// Newest first.
    public var entries: [Entry]

    public init(roomId: String, epoch: String, version: Int64, oldest: Int64, entries: [Entry]) {
        self.roomId = roomId
        self.epoch = epoch
        self.version = version
        self.oldest = oldest
        self.entries = entries
    }

    /// The query (`limit` 1-200, default 50 by the protocol; `before`: only versions
    /// below it).
    public static func request(requestId: String, roomId: String, before: Int64?, limit: Int?) -> JSON {
        var members: [JSON.Member] = [
            .init("requestId", .string(requestId)),
            .init("type", .string(ClientRequest.Kind.roomHistory.rawValue)),
            .init("roomId", .string(roomId)),
        ]
        if let before { members.append(.init("before", .int(before))) }
        if let limit { members.append(.init("limit", .int(Int64(limit)))) }
        return .object(members)
    }

    /// Reads a `roomHistory` response (an error answer is the caller's business).
    public init(json: JSON) throws(Rejection) {
        let reader = PayloadReader(object: json)
        roomId = try reader.string("roomId")
        epoch = try reader.string("epoch")
        version = try reader.int64("version")
        oldest = try reader.int64("oldest")
        guard case .array(let items)? = json["entries"] else { throw .invalid("entries must be an array") }
        var entries: [Entry] = []
        entries.reserveCapacity(items.count)
        for item in items { entries.append(try Entry(json: item)) }
        self.entries = entries
    }
}
