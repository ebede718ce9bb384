/// What applying one DMCommand did: the receipt's status and version, and what the store
/// must persist.
public struct DMOutcome: Sendable, Equatable {
    /// Nil when the command was accepted.
    public let rejection: Rejection?
    /// The version for the receipt: after the command when accepted, else the current
    /// one; nil when the conversation does not exist.
    public let version: Int64?
    /// False for a rejection and for an accepted command that changed nothing (`read`
    /// with nothing unread): then there is nothing to persist or publish.
    public let changed: Bool
    /// Messages appended by this command, to insert into the store.
    public let newMessages: [DirectMessage]
    /// Ids of messages in the in-memory window that this command marked read.
    public let markedRead: [String]
    /// Set by an accepted `read` that changed something: every stored message from this
    /// user in the conversation is now read, including any older than the window.
    public let readFrom: String?

    public init(
        rejection: Rejection?, version: Int64?, changed: Bool,
        newMessages: [DirectMessage] = [], markedRead: [String] = [], readFrom: String? = nil
    ) {
        self.rejection = rejection
        self.version = version
        self.changed = changed
        self.newMessages = newMessages
        self.markedRead = markedRead
        self.readFrom = readFrom
    }

    static func rejected(_ code: ReceiptCode, _ message: String, version: Int64) -> DMOutcome {
        DMOutcome(rejection: Rejection(code, message), version: version > 0 ? version : nil, changed: false)
    }

    public var isAccepted: Bool { rejection == nil }

    /// The receipt for the command with this id.
    public func receipt(id: String) -> Receipt {
        if let rejection {
            return .rejected(id: id, kind: .dm, rejection, version: version)
        }
        return .accepted(id: id, kind: .dm, version: version)
    }
}
