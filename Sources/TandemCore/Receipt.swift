/// The end-to-end acknowledgement of one inbound event or command (CONTRACT "Receipts").
public struct Receipt: Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case room, dm, workout }
    public enum Status: String, Codable, Sendable { case accepted, rejected, duplicate }

    public var id: String
    public var kind: Kind
    public var status: Status
    public var code: ReceiptCode?
    public var message: String
    /// The version after the event (accepted), or the current one; nil where the
    /// room, conversation or workout does not exist yet.
    public var version: Int64?
    /// On a duplicate: the outcome the first copy got, when the coordinator still knows
    /// it (an addition to the contract's receipt; clients that do not know it ignore it).
    public var original: Original?

    /// The outcome of the first copy of an id: what a resend would have been told.
    public struct Original: Sendable, Equatable {
        public var status: Status
        public var code: ReceiptCode?
        public var version: Int64?

        public init(status: Status, code: ReceiptCode?, version: Int64?) {
            self.status = status
            self.code = code
            self.version = version
        }

        public init(_ receipt: Receipt) {
            self.init(status: receipt.status, code: receipt.code, version: receipt.version)
        }
    }

    public init(id: String, kind: Kind, status: Status, code: ReceiptCode?, message: String, version: Int64?) {
        self.id = id
        self.kind = kind
        self.status = status
        self.code = code
        self.message = message
        self.version = version
    }

    public static func accepted(id: String, kind: Kind, version: Int64?) -> Receipt {
        Receipt(id: id, kind: kind, status: .accepted, code: nil, message: "accepted", version: version)
    }

    public static func duplicate(id: String, kind: Kind, version: Int64?, original: Original? = nil) -> Receipt {
        var receipt = Receipt(id: id, kind: kind, status: .duplicate, code: nil, message: "already processed", version: version)
        receipt.original = original
        return receipt
    }

    public static func rejected(id: String, kind: Kind, _ rejection: Rejection, version: Int64?) -> Receipt {
        Receipt(id: id, kind: kind, status: .rejected, code: rejection.code, message: rejection.message, version: version)
    }
}

/// Every code a receipt can carry. Fixed by the wire contract.
public enum ReceiptCode: String, Codable, Sendable, CaseIterable {
    case invalidPayload = "invalid_payload"
    case payloadTooLarge = "payload_too_large"
    case alreadyExists = "already_exists"
    case notFound = "not_found"
    case deleted
    case ownedByOther = "owned_by_other"
    case notOwner = "not_owner"
    case selfConversation = "self_conversation"
    case alreadyRequested = "already_requested"
    case alreadyActive = "already_active"
    case noPendingRequest = "no_pending_request"
    case notActive = "not_active"
    case alreadyStarted = "already_started"
    case notRunning = "not_running"
    case notPaused = "not_paused"
    case notOrigin = "not_origin"
    case watchOnly = "watch_only"
    case stale
    case rateLimited = "rate_limited"
    case roomFull = "room_full"
    // Room membership (CONTRACT "Room membership").
    case notMember = "not_member"
    case forbidden
    case alreadyMember = "already_member"
    case memberNotFound = "member_not_found"
    case membersFull = "members_full"
    case unknownUser = "unknown_user"
    // Room history (CONTRACT "Room history, restore and cursors").
    case historyGone = "history_gone"
}

/// Why the coordinator refused something: a code for machines, a sentence for people.
public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ReceiptCode
    public var message: String

    public init(_ code: ReceiptCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func invalid(_ message: String) -> Rejection { Rejection(.invalidPayload, message) }

    public var description: String { "\(code.rawValue): \(message)" }
}
