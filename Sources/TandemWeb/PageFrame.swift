import TandemClient
import TandemCore

/// One frame from the page, read and checked like an MQTT payload: the page is a
/// client like any other, and nothing it sends is trusted. The shapes are in
/// docs/PROTOCOL.md ("The browser front end").
public enum PageFrame: Sendable, Equatable {
    /// Show this room on the tab (one room per tab; a new `watch` replaces the last).
    case watch(room: String)
    /// A sticker edit (`create|acquire|update|release|delete`) under the page's `ref`.
    /// `continues`: an update that continues a drag begun by an earlier update (see
    /// ``Tab``: only a drag's first update goes on the undo stack, so one undo takes back
    /// the whole drag).
    case edit(ref: String, room: String, type: EditEvent.Kind, sticker: String, image: String?, frame: Frame?, continues: Bool = false)
    /// A membership event of a room (`invite|remove|role|leave`) under the page's `ref`.
    case member(ref: String, room: String, type: EditEvent.Kind, member: String?, role: MemberRole?)
    /// A direct-message command to `peer` under the page's `ref`.
    case dm(ref: String, type: DMCommand.Kind, peer: String, text: String?)
    /// An older page of the conversation with `peer`: the messages sent before `before`
    /// (nil: the newest), from the coordinator's history.
    case history(peer: String, before: Millis?)
    /// Undo (or redo) this person's last change in `room` through the session's client:
    /// the stacks are the person's, shared by all their tabs.
    case undo(ref: String, room: String, direction: UndoHistory.Direction)
    /// Return `room` to what it was right after `version` (a `restore` EditEvent).
    case restore(ref: String, room: String, version: Int64)
    /// A page of `room`'s history: its changes below version `before` (nil: the newest).
    case roomHistory(room: String, before: Int64?)
    /// This person's pointer over `room`'s photo, in the board's units (nil: it left).
    case cursor(room: String, position: CursorPosition?)
    /// Nothing but a sign of life (the page's keep-alive).
    case ping

    /// The largest frame read (bytes of one WebSocket message): the contract's payload
    /// limit. A larger one gets a `frame_too_large` error frame.
    public static let maxBytes = WireLimits.maxPayloadBytes

    /// The board's size in its own units (sticker frames, cursors): the photo's pixels.
    public static let boardWidth = 1000.0
    public static let boardHeight = 625.0
    /// How many history entries a `roomHistory` frame asks for at a time.
    public static let historyPage = 50

    /// Why a frame was refused: the error frame's `code` and `message`, and the page's
    /// `ref` when one could be read.
    public struct Problem: Error, Sendable, Equatable {
        public enum Code: String, Sendable, CaseIterable {
            /// Not JSON, not an object, a field missing or wrong.
            case invalidFrame = "invalid_frame"
            /// Over ``PageFrame/maxBytes``.
            case frameTooLarge = "frame_too_large"
            /// A `type` the server does not know.
            case unknownType = "unknown_type"
            /// A binary WebSocket message: frames are JSON text.
            case binaryFrame = "binary_frame"
            /// A good frame that could not be carried out now (the coordinator did not
            /// answer a history query, a room could not be followed).
            case unavailable
        }

        public var code: Code
        public var message: String
        public var ref: String?

        public init(_ code: Code, _ message: String, ref: String? = nil) {
            self.code = code
            self.message = message
            self.ref = ref
        }
    }

    /// The frame `bytes` hold; throws why not (the package's one convention: a decoder
    /// throws its typed error).
    public static func decode(_ bytes: some Collection<UInt8>) throws(Problem) -> PageFrame {
        if bytes.count > maxBytes {
            throw Problem(.frameTooLarge, "the frame is \(bytes.count) bytes; the limit is \(maxBytes)")
        }
        let reader: PayloadReader
        do throws(DecodeFailure) {
            reader = try PayloadReader.read(bytes, idSource: .field("ref"))
        } catch {
            throw Problem(.invalidFrame, error.rejection.message, ref: error.id.isEmpty ? nil : error.id)
        }
        let ref = reader.id.isEmpty ? nil : reader.id
        if let type = reader.object["type"]?.stringValue, !types.contains(type) {
            throw Problem(.unknownType, "unknown frame type \(type.debugDescription): expected one of \(types.joined(separator: ", "))", ref: ref)
        }
        do throws(Rejection) {
            return try decode(reader)
        } catch {
            throw Problem(.invalidFrame, error.message, ref: ref)
        }
    }

    /// This frame's `type`.
    public var type: String {
        switch self {
        case .watch: "watch"
        case .edit: "edit"
        case .member: "member"
        case .dm: "dm"
        case .history: "history"
        case .undo(_, _, let direction): direction.rawValue
        case .restore: "restore"
        case .roomHistory: "roomHistory"
        case .cursor: "cursor"
        case .ping: "ping"
        }
    }

    /// The frame types the page may send.
    public static let types = ["ping", "watch", "edit", "member", "dm", "history", "undo", "redo", "restore", "roomHistory", "cursor"]

    private static func decode(_ reader: PayloadReader) throws(Rejection) -> PageFrame {
        let type = try reader.string("type")
        switch type {
        case "ping":
            return .ping
        case "watch":
            return .watch(room: try reader.identifier("room"))
        case "edit":
            let ref = try reader.identifier("ref")
            let room = try reader.identifier("room")
            let kind = try reader.oneOf("op", EditEvent.Kind.self)
            guard kind.namesSticker else {
                throw .invalid("op must be one of create, acquire, update, release, delete (membership goes in a member frame, a restore in a restore frame)")
            }
            let sticker = try reader.identifier("sticker")
            let image = try reader.optionalString("image")
            if let image, image.isEmpty || image.count > 256 {
                throw .invalid("image must be 1-256 characters")
            }
            let frame: Frame? = try reader.has("frame") ? Frame(reader: reader.nested("frame")) : nil
            switch kind {
            case .create:
                guard image != nil else { throw .invalid("image is required for create") }
                guard frame != nil else { throw .invalid("frame is required for create") }
            case .update:
                guard frame != nil else { throw .invalid("frame is required for update") }
            default:
                break
            }
            let continues: Bool
            switch reader.object["continues"] {
            case nil, .null?: continues = false
            case .bool(let value)?: continues = value
            case let other?: throw .invalid("continues must be true or false, not \(other.typeName)")
            }
            if continues, kind != .update { throw .invalid("continues is for an update (one that continues a drag)") }
            return .edit(ref: ref, room: room, type: kind, sticker: sticker, image: image, frame: frame, continues: continues)
        case "member":
            let ref = try reader.identifier("ref")
            let room = try reader.identifier("room")
            let kind = try reader.oneOf("op", EditEvent.Kind.self)
            guard kind.isMembership else { throw .invalid("op must be one of invite, remove, role, leave") }
            let member: String? = try reader.has("member") ? reader.identifier("member") : nil
            let role = try reader.optionalOneOf("role", MemberRole.self)
            if kind != .leave, member == nil { throw .invalid("member is required for \(kind.rawValue)") }
            if kind == .role, role == nil { throw .invalid("role is required for role") }
            if role == .owner { throw .invalid("role must be editor or viewer") }
            return .member(ref: ref, room: room, type: kind, member: kind == .leave ? nil : member, role: role)
        case "dm":
            let ref = try reader.identifier("ref")
            let kind = try reader.oneOf("op", DMCommand.Kind.self)
            let peer = try reader.identifier("peer")
            let text = try reader.optionalString("text")
            if let text, text.utf8.count > WireLimits.maxDMTextBytes {
                throw .invalid("text is \(text.utf8.count) bytes; the limit is \(WireLimits.maxDMTextBytes)")
            }
            if kind == .message, text?.isEmpty ?? true { throw .invalid("text is required for message") }
            return .dm(ref: ref, type: kind, peer: peer, text: text)
        case "history":
            let peer = try reader.identifier("peer")
            let before: Millis? = try reader.has("before") ? reader.int64("before") : nil
            if let before, before <= 0 { throw .invalid("before must be a positive timestamp (ms)") }
            return .history(peer: peer, before: before)
        case "undo", "redo":
            let ref = try reader.identifier("ref")
            let room = try reader.identifier("room")
            return .undo(ref: ref, room: room, direction: type == "undo" ? .undo : .redo)
        case "restore":
            let ref = try reader.identifier("ref")
            let room = try reader.identifier("room")
            let version = try reader.int64("version")
            guard version >= 1 else { throw .invalid("version must be a version of the room (1 or more)") }
            return .restore(ref: ref, room: room, version: version)
        case "roomHistory":
            let room = try reader.identifier("room")
            let before: Int64? = try reader.has("before") ? reader.int64("before") : nil
            if let before, before < 1 { throw .invalid("before must be a version of the room (1 or more)") }
            return .roomHistory(room: room, before: before)
        case "cursor":
            let room = try reader.identifier("room")
            // Both or neither: no position says the pointer left the photo.
            guard reader.has("x") || reader.has("y") else { return .cursor(room: room, position: nil) }
            let x = try reader.double("x"), y = try reader.double("y")
            guard (0...boardWidth).contains(x), (0...boardHeight).contains(y) else {
                throw .invalid("x and y must be on the board: 0-\(Int(boardWidth)) and 0-\(Int(boardHeight))")
            }
            return .cursor(room: room, position: CursorPosition(x: x, y: y))
        default:
            throw .invalid("unknown frame type \(type.debugDescription)")
        }
    }
}
