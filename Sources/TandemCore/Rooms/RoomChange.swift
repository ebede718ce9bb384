/// One accepted event or lock expiry, as a RoomChanges message lists it.
public struct RoomChange: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case create, acquire, update, release, delete, expire
    }

    /// The room's version right after this change.
    public var version: Int64
    /// nil for an expiry.
    public var eventId: String?
    /// The sender; nil for an expiry.
    public var userId: String?
    public var type: Kind
    public var stickerId: String
    /// The sticker after the change; nil after a delete.
    public var sticker: Sticker?

    public init(version: Int64, eventId: String?, userId: String?, type: Kind, stickerId: String, sticker: Sticker?) {
        self.version = version
        self.eventId = eventId
        self.userId = userId
        self.type = type
        self.stickerId = stickerId
        self.sticker = sticker
    }

    /// `{"version","eventId","userId","type","stickerId","sticker"}`, nulls written out.
    public func json() -> JSON {
        .obj([
            "version": .int(version),
            "eventId": JSON(eventId),
            "userId": JSON(userId),
            "type": .string(type.rawValue),
            "stickerId": .string(stickerId),
            "sticker": sticker?.json() ?? .null,
        ])
    }

    /// Reads a change the coordinator wrote.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("change must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        version = try reader.int64("version")
        eventId = try reader.optionalString("eventId")
        userId = try reader.optionalString("userId")
        type = try reader.oneOf("type", Kind.self)
        stickerId = try reader.string("stickerId")
        if let value = json["sticker"], !value.isNull {
            sticker = try Sticker(json: value)
        } else {
            sticker = nil
        }
    }
}
