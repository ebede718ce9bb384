/// One event of a room, as a client publishes it on `rooms/{roomId}/events/{userId}`:
/// an edit of its stickers (CONTRACT "Rooms") or a change of its members (CONTRACT
/// "Room membership"). The sender is the topic's `{userId}`, never a payload field, so
/// it is not part of this value.
public struct EditEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case create, acquire, update, release, delete
        case invite, remove, role, leave
        /// The room back as it was at a version (CONTRACT "Room history, restore and cursors").
        case restore

        /// invite, remove, role and leave: they name a member, not a sticker.
        public var isMembership: Bool {
            switch self {
            case .invite, .remove, .role, .leave: true
            case .create, .acquire, .update, .release, .delete, .restore: false
            }
        }

        /// Events that name a sticker (all but membership events and restore).
        public var namesSticker: Bool { !isMembership && self != .restore }
    }

    public var eventId: String
    public var type: Kind
    /// "" for membership events, which do not use it.
    public var stickerId: String
    /// Milliseconds since the epoch; after ordering, possibly clamped to the coordinator's clock.
    public var timestamp: Millis
    /// Required for create; optional for update (replaces the image); ignored otherwise.
    public var image: String?
    /// Required for create and update; ignored otherwise.
    public var frame: Frame?
    /// The member an invite, remove or role names; nil otherwise.
    public var member: String?
    /// The role an invite (default editor) or role event gives; nil otherwise.
    public var role: MemberRole?
    /// A restore's version: the room becomes what it was right after it. nil otherwise.
    public var restoreVersion: Int64?

    public init(eventId: String, type: Kind, stickerId: String, timestamp: Millis, image: String? = nil, frame: Frame? = nil) {
        self.eventId = eventId
        self.type = type
        self.stickerId = stickerId
        self.timestamp = timestamp
        self.image = image
        self.frame = frame
    }

    /// A restore of the room to what it was right after `version`.
    public init(eventId: String, restoringTo version: Int64, timestamp: Millis) {
        self.eventId = eventId
        type = .restore
        stickerId = ""
        self.timestamp = timestamp
        restoreVersion = version
    }

    /// A membership event: `invite`, `remove` and `role` name `member`; `invite` and
    /// `role` give `role` (an invite's defaults to editor).
    public init(eventId: String, type: Kind, member: String?, role: MemberRole? = nil, timestamp: Millis) {
        precondition(type.isMembership, "\(type) is not a membership event")
        self.eventId = eventId
        self.type = type
        stickerId = ""
        self.timestamp = timestamp
        self.member = type == .leave ? nil : member
        self.role = type == .invite ? (role ?? .editor) : type == .role ? role : nil
    }
}

// MARK: - Wire

extension EditEvent {
    /// Decodes and validates an inbound payload. Every failure is `invalid_payload` (or
    /// `payload_too_large`) with a message naming the field; the failure's id is the
    /// payload's `eventId` when a valid one could be read, else "".
    public static func decode(_ bytes: some Collection<UInt8>) throws(DecodeFailure) -> EditEvent {
        try PayloadReader.decode(bytes, idSource: .field("eventId")) { (reader) throws(Rejection) in try EditEvent(reader: reader) }
    }

    /// Reads the fields of an already parsed payload, in the order the contract lists them.
    public init(reader: PayloadReader) throws(Rejection) {
        eventId = try reader.identifier("eventId")
        type = try reader.oneOf("type", Kind.self)
        if type.isMembership {
            // stickerId is not used by these: whatever it holds is ignored.
            stickerId = ""
            timestamp = try reader.int64("timestamp")
            guard timestamp >= 0 else { throw .invalid("timestamp must not be negative") }
            image = nil
            frame = nil
            try readMembership(reader)
            return
        }
        if type == .restore {
            // stickerId is not used: whatever it holds is ignored.
            stickerId = ""
            timestamp = try reader.int64("timestamp")
            guard timestamp >= 0 else { throw .invalid("timestamp must not be negative") }
            guard reader.has("version") else { throw .invalid("version is required for restore") }
            let version = try reader.int64("version")
            guard version >= 1 else { throw .invalid("version must be at least 1, not \(version)") }
            restoreVersion = version
            image = nil
            frame = nil
            member = nil
            role = nil
            return
        }
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

    /// `member` (invite, remove, role) and `role` (role; invite, default editor). A
    /// role must be one an event may give: `owner` only passes on when the owner leaves.
    private mutating func readMembership(_ reader: PayloadReader) throws(Rejection) {
        switch type {
        case .invite, .remove, .role:
            guard reader.has("member") else { throw .invalid("member is required for \(type.rawValue)") }
            member = try reader.identifier("member")
        default:
            member = nil
        }
        switch type {
        case .invite, .role:
            if reader.has("role") {
                let given = try reader.oneOf("role", MemberRole.self)
                guard MemberRole.grantable.contains(given) else {
                    throw .invalid("role must be editor or viewer, not \(given.rawValue): ownership passes only when the owner leaves")
                }
                role = given
            } else if type == .role {
                throw .invalid("role is required for role")
            } else {
                role = .editor
            }
        default:
            role = nil
        }
    }

    /// The payload a client publishes (the agent), keys in the contract's order.
    public func json() -> JSON {
        var members: [JSON.Member] = [
            .init("eventId", .string(eventId)),
            .init("type", .string(type.rawValue)),
        ]
        if type.namesSticker { members.append(.init("stickerId", .string(stickerId))) }
        members.append(.init("timestamp", .int(timestamp)))
        if let restoreVersion { members.append(.init("version", .int(restoreVersion))) }
        if let image { members.append(.init("image", .string(image))) }
        if let frame { members.append(.init("frame", frame.json())) }
        if let member { members.append(.init("member", .string(member))) }
        if let role { members.append(.init("role", .string(role.rawValue))) }
        return .object(members)
    }
}
