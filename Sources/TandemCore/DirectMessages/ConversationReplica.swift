/// What a client holds of one view of a conversation: the coordinator's state at a
/// version, from a snapshot, kept current by ConversationChanges.
///
/// - A snapshot is taken when it is newer than what is held, or of a new epoch (then
///   everything held is thrown away). A snapshot carries only the latest
///   ``Conversation/snapshotSize`` messages: in the same epoch, the held messages older
///   than its first are kept, their read marks brought up to date from its `unread`.
/// - A ConversationChanges is applied when its `fromVersion` is the held version of the
///   same epoch. One that starts later is a gap: the caller asks for the changes since
///   the held version (a `dmChanges` request, one round trip). One that ends at or before
///   the held version is stale and ignored.
public struct ConversationReplica: Sendable, Equatable {
    public enum ChangesOutcome: Sendable, Equatable {
        /// Applied: the view is now at the changes' `toVersion`.
        case applied
        /// Already known (or for another view): nothing to do.
        case ignored
        /// Versions are missing between the view and these changes (or no snapshot has
        /// been taken yet in this epoch): take the next snapshot.
        case gap
    }

    public let user: String
    public let peer: String
    /// Nil before the first snapshot.
    public private(set) var epoch: String?
    /// 0 before the first snapshot.
    public private(set) var version: Int64 = 0
    public private(set) var status: ConversationStatus?
    public private(set) var unread = 0
    public private(set) var updatedAt: Millis = 0
    /// The latest messages, oldest first, at most `Conversation.windowSize`.
    public private(set) var messages: [DirectMessage] = []

    public init(user: String, peer: String) {
        self.user = user
        self.peer = peer
    }

    /// A replica holding `snapshot`.
    public init(snapshot: ConversationSnapshot) {
        self.init(user: snapshot.user, peer: snapshot.peer)
        self.snapshot(snapshot)
    }

    /// The view as a snapshot value, nil before the first snapshot.
    public var snapshot: ConversationSnapshot? {
        guard let epoch, let status else { return nil }
        return ConversationSnapshot(
            user: user, peer: peer, epoch: epoch, status: status, version: version,
            updatedAt: updatedAt, unread: unread, messages: messages)
    }

    /// Takes a snapshot of this view when it is newer, or of another epoch. Returns
    /// whether it was taken.
    @discardableResult
    public mutating func snapshot(_ snapshot: ConversationSnapshot) -> Bool {
        guard snapshot.user == user, snapshot.peer == peer else { return false }
        if let epoch, epoch == snapshot.epoch, snapshot.version <= version { return false }
        let kept = epoch == snapshot.epoch ? held(olderThan: snapshot) : []
        epoch = snapshot.epoch
        version = snapshot.version
        status = snapshot.status
        unread = snapshot.unread
        updatedAt = snapshot.updatedAt
        messages = Array((kept + snapshot.messages).suffix(Conversation.windowSize))
        return true
    }

    /// The held messages before the snapshot's first one (none when the snapshot's first
    /// is not held: what lies between is unknown), with the read marks the snapshot
    /// implies. `read` marks every message from the other side, so the unread messages of
    /// either side are always its latest ones: the peer's `unread` minus those unread in
    /// the snapshot are the newest of the peer's held ones, and once the oldest of the
    /// user's own messages in the snapshot is read, all older ones are.
    private func held(olderThan snapshot: ConversationSnapshot) -> [DirectMessage] {
        guard let first = snapshot.messages.first, let cut = messages.firstIndex(where: { $0.id == first.id }) else { return [] }
        var kept = Array(messages[..<cut])
        var unreadLeft = max(0, snapshot.unread - snapshot.messages.count { $0.sender == peer && !$0.isRead })
        let ownAllRead = snapshot.messages.first { $0.sender == user }?.isRead == true
        for i in kept.indices.reversed() {
            let message = kept[i]
            if message.sender == peer {
                let isUnread = unreadLeft > 0
                if isUnread { unreadLeft -= 1 }
                kept[i] = DirectMessage(id: message.id, sender: message.sender, text: message.text, sentAt: message.sentAt, isRead: !isUnread)
            } else if ownAllRead {
                kept[i] = message.markedRead()
            }
        }
        return kept
    }

    /// Applies `changes` when they start at the held version of the same epoch.
    /// `updatedAt` becomes `now` when given (changes do not carry the coordinator's
    /// time; the next snapshot corrects it).
    @discardableResult
    public mutating func apply(_ changes: ConversationChanges, now: Millis? = nil) -> ChangesOutcome {
        guard changes.user == user, changes.peer == peer, changes.toVersion >= changes.fromVersion else { return .ignored }
        guard let epoch, epoch == changes.epoch else { return .gap }
        if changes.toVersion <= version { return .ignored }
        guard changes.fromVersion == version else { return .gap }
        var index: [String: Int] = [:]
        for (i, message) in messages.enumerated() { index[message.id] = i }
        for change in changes.changes {
            for message in change.messages {
                if let i = index[message.id] {
                    messages[i] = message
                } else {
                    index[message.id] = messages.count
                    messages.append(message)
                }
            }
        }
        if messages.count > Conversation.windowSize {
            messages.removeFirst(messages.count - Conversation.windowSize)
        }
        version = changes.toVersion
        status = changes.status
        unread = changes.unread
        if let now { updatedAt = now }
        return .applied
    }
}
