/// The conversation between two users: both participants' views, one version counter
/// shared by both, and the latest messages (CONTRACT "Direct messages").
///
/// A conversation with version 0 does not exist yet: it exists from its first accepted
/// command. Only the latest `windowSize` messages are kept in memory, for snapshots; the
/// full history lives in the store, which is why `apply` reports what it appended and
/// what it marked read.
public struct Conversation: Sendable, Equatable {
    /// How many of the latest messages are kept in memory: what a `read` marks and
    /// sends as new copies in ConversationChanges, and what a client's replica holds.
    public static let windowSize = 200
    /// How many of the latest messages a snapshot carries (the contract's floor: 20).
    /// A snapshot is republished whole whenever it goes out, so its size is most of what
    /// a chat at a person's pace costs; older messages come from changes and history.
    public static let snapshotSize = 20

    /// One participant's side: their status and how many messages from the peer they
    /// have not read (counted over the full history, not only the window).
    public struct View: Sendable, Equatable {
        public let status: ConversationStatus
        public let unread: Int

        public init(status: ConversationStatus, unread: Int) {
            self.status = status
            self.unread = unread
        }
    }

    /// Both views, by the key's order.
    public struct Views: Sendable, Equatable {
        public let low: View
        public let high: View

        public init(low: View, high: View) {
            self.low = low
            self.high = high
        }
    }

    public let key: ConversationKey
    /// Nil while the conversation does not exist.
    public private(set) var views: Views?
    /// 0 while the conversation does not exist.
    public private(set) var version: Int64
    public private(set) var updatedAt: Millis
    /// The latest messages, oldest first, at most `windowSize`.
    public private(set) var messages: [DirectMessage]

    /// A conversation that does not exist yet.
    public init(key: ConversationKey) {
        self.key = key
        self.views = nil
        self.version = 0
        self.updatedAt = 0
        self.messages = []
    }

    public init(key: ConversationKey, views: Views?, version: Int64, updatedAt: Millis, messages: [DirectMessage]) {
        self.key = key
        self.views = views
        self.version = version
        self.updatedAt = updatedAt
        self.messages = Array(messages.suffix(Conversation.windowSize))
    }

    public var exists: Bool { views != nil }

    /// `user`'s view, nil when the conversation does not exist or `user` is not in it.
    public func view(of user: String) -> View? {
        guard let views, key.contains(user) else { return nil }
        return user == key.low ? views.low : views.high
    }

    public func status(of user: String) -> ConversationStatus? { view(of: user)?.status }

    /// Applies one command from `sender` (the topic's userId) at the coordinator's time
    /// `now`, which becomes `updatedAt` when something changes.
    ///
    /// - Precondition: the conversation's key is `ConversationKey(sender, command.peer)`.
    public mutating func apply(_ command: DMCommand, from sender: String, now: Millis) -> DMOutcome {
        if command.peer == sender {
            return .rejected(.selfConversation, "you cannot hold a conversation with yourself", version: 0)
        }
        precondition(key == ConversationKey(sender, command.peer), "command applied to the wrong conversation")
        let peer = command.peer
        let mine = status(of: sender)

        switch command.type {
        case .request:
            switch mine {
            case nil, .declined, .left:
                setStatuses(sender: sender, .pending, peer: .received)
                let appended = append(command, from: sender)
                return accept(now: now, newMessages: appended)
            case .received:
                // Crossing requests: the peer asked first, so this request accepts.
                setStatuses(sender: sender, .active, peer: .active)
                let appended = append(command, from: sender)
                return accept(now: now, newMessages: appended)
            case .pending:
                return .rejected(.alreadyRequested, "you already asked \(peer); wait for an answer", version: version)
            case .active:
                return .rejected(.alreadyActive, "the conversation with \(peer) is already active", version: version)
            }

        case .accept, .decline:
            guard mine == .received else {
                return .rejected(.noPendingRequest, "\(peer) has no request waiting for your answer", version: version)
            }
            let next: ConversationStatus = command.type == .accept ? .active : .declined
            setStatuses(sender: sender, next, peer: next)
            return accept(now: now)

        case .message:
            guard mine == .active else {
                return .rejected(.notActive, "the conversation with \(peer) is not active", version: version)
            }
            let appended = append(command, from: sender)
            return accept(now: now, newMessages: appended)

        case .read:
            guard let view = view(of: sender) else {
                return .rejected(.notFound, "there is no conversation with \(peer)", version: version)
            }
            guard view.unread > 0 || messages.contains(where: { $0.sender == peer && !$0.isRead }) else {
                return DMOutcome(rejection: nil, version: version, changed: false)
            }
            var marked: [String] = []
            messages = messages.map { message in
                guard message.sender == peer, !message.isRead else { return message }
                marked.append(message.id)
                return message.markedRead()
            }
            setView(of: sender, View(status: view.status, unread: 0))
            return accept(now: now, markedRead: marked, readFrom: peer)

        case .leave:
            switch mine {
            case .active, .pending, .received:
                setStatuses(sender: sender, .left, peer: .left)
                return accept(now: now)
            case nil, .declined, .left:
                return .rejected(.notActive, "the conversation with \(peer) is not open", version: version)
            }
        }
    }

    // MARK: Transitions

    private mutating func accept(
        now: Millis, newMessages: [DirectMessage] = [], markedRead: [String] = [], readFrom: String? = nil
    ) -> DMOutcome {
        version += 1
        updatedAt = now
        return DMOutcome(
            rejection: nil, version: version, changed: true,
            newMessages: newMessages, markedRead: markedRead, readFrom: readFrom
        )
    }

    /// Sets both statuses, keeping the unread counts (zero for a new conversation).
    private mutating func setStatuses(sender: String, _ senderStatus: ConversationStatus, peer peerStatus: ConversationStatus) {
        let peer = key.peer(of: sender)
        let senderView = View(status: senderStatus, unread: view(of: sender)?.unread ?? 0)
        let peerView = View(status: peerStatus, unread: view(of: peer)?.unread ?? 0)
        views = sender == key.low
            ? Views(low: senderView, high: peerView)
            : Views(low: peerView, high: senderView)
    }

    private mutating func setView(of user: String, _ view: View) {
        guard let views else { return }
        self.views = user == key.low ? Views(low: view, high: views.high) : Views(low: views.low, high: view)
    }

    /// Appends the command's text, if any, as a message to the peer; returns what it added.
    private mutating func append(_ command: DMCommand, from sender: String) -> [DirectMessage] {
        guard let text = command.text else { return [] }
        let message = DirectMessage(id: command.commandId, sender: sender, text: text, sentAt: command.timestamp)
        messages.append(message)
        if messages.count > Conversation.windowSize {
            messages.removeFirst(messages.count - Conversation.windowSize)
        }
        let peer = key.peer(of: sender)
        if let peerView = view(of: peer) {
            setView(of: peer, View(status: peerView.status, unread: peerView.unread + 1))
        }
        return [message]
    }
}
