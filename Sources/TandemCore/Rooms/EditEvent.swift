/// One edit of a room's stickers, as a client publishes it on
/// `rooms/{roomId}/events/{userId}` (CONTRACT "Rooms"). The sender is the topic's
/// `{userId}`, never a payload field, so it is not part of this value.
public struct EditEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case create, acquire, update, release, delete
    }

    public var eventId: String
    public var type: Kind
    public var stickerId: String
    /// Milliseconds since the epoch; after ordering, possibly clamped to the coordinator's clock.
    public var timestamp: Millis
    /// Required for create; optional for update (replaces the image); ignored otherwise.
    public var image: String?
    /// Required for create and update; ignored otherwise.
    public var frame: Frame?

    public init(eventId: String, type: Kind, stickerId: String, timestamp: Millis, image: String? = nil, frame: Frame? = nil) {
        self.eventId = eventId
        self.type = type
        self.stickerId = stickerId
        self.timestamp = timestamp
        self.image = image
        self.frame = frame
    }
}

// MARK: - Wire

extension EditEvent {
    /// Decodes and validates an inbound payload. Every failure is `invalid_payload` (or
    /// `payload_too_large`) with a message naming the field; the failure's id is the
    /// payload's `eventId` when a valid one could be read, else "".
    public static func decode(_ bytes: some Collection<UInt8>) -> Result<EditEvent, DecodeFailure> {
        PayloadReader.decode(bytes, idSource: .field("eventId")) { (reader) throws(Rejection) in try EditEvent(reader: reader) }
    }

    /// Reads the fields of an already parsed payload, in the order the contract lists them.
    public init(reader: PayloadReader) throws(Rejection) {
        eventId = try reader.identifier("eventId")
        type = try reader.oneOf("type", Kind.self)
        stickerId = try reader.identifier("stickerId")
        timestamp = try reader.int64("timestamp")
        guard timestamp >= 0 else { throw .invalid("timestamp must not be negative") }

        // A field that is present must be valid, whatever the type; required ones must be present.
        if let image = try reader.optionalString("image") {
            let length = image.unicodeScalars.count
            guard length >= 1, length <= WireLimits.maxImageLength else {
                throw .invalid("image must be 1-\(WireLimits.maxImageLength) characters, not \(length)")
            }
            self.image = image
        } else if type == .create {
            throw .invalid("image is required for create")
        } else {
            image = nil
        }
        if reader.has("frame") {
            frame = try Frame(reader: reader.nested("frame"))
        } else if type == .create || type == .update {
            throw .invalid("frame is required for \(type.rawValue)")
        } else {
            frame = nil
        }
    }

    /// The payload a client publishes (the agent), keys in the contract's order.
    public func json() -> JSON {
        var members: [JSON.Member] = [
            .init("eventId", .string(eventId)),
            .init("type", .string(type.rawValue)),
            .init("stickerId", .string(stickerId)),
            .init("timestamp", .int(timestamp)),
        ]
        if let image { members.append(.init("image", .string(image))) }
        if let frame { members.append(.init("frame", frame.json())) }
        return .object(members)
    }
}
