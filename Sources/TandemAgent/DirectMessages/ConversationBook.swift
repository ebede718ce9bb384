import TandemCore

/// What `tandem-agent dm` shows of its conversations: each view as the client last
/// handed it over (``TandemClient/conversations()``: snapshots kept current by
/// ConversationChanges), and what each new view changed, for printing.
public struct ConversationBook: Sendable {
    public enum Update: Sendable, Equatable {
        /// A conversation seen for the first time.
        case appeared(peer: String, status: ConversationStatus)
        case statusChanged(peer: String, from: ConversationStatus, to: ConversationStatus)
        case message(peer: String, DirectMessage)
        /// The peer read this many of my messages.
        case readByPeer(peer: String, count: Int)
    }

    public let user: String
    /// Each view as shown, by peer (a replica only to take newer views and new epochs).
    private var views: [String: ConversationReplica] = [:]

    /// Each view as it is held now, by peer.
    public var conversations: [String: ConversationSnapshot] { views.compactMapValues(\.snapshot) }

    public init(user: String) {
        self.user = user
    }

    /// Peers, most recently updated first.
    public var peers: [String] {
        conversations.values.sorted { ($0.updatedAt, $0.peer) > ($1.updatedAt, $1.peer) }.map(\.peer)
    }

    /// Takes a view when it is newer than what is shown (or of a new epoch); returns
    /// what changed, or nil when it was ignored.
    public mutating func update(with view: ConversationSnapshot) -> [Update]? {
        guard view.user == user else { return nil }
        var replica = views[view.peer] ?? ConversationReplica(user: user, peer: view.peer)
        let previous = replica.snapshot
        guard replica.snapshot(view) else { return nil }
        views[view.peer] = replica
        return Self.updates(from: previous, to: view, user: user)
    }

    static func updates(from previous: ConversationSnapshot?, to snapshot: ConversationSnapshot, user: String) -> [Update] {
        let peer = snapshot.peer
        guard let previous, previous.epoch == snapshot.epoch else {
            return [.appeared(peer: peer, status: snapshot.status)] + snapshot.messages.suffix(3).map { .message(peer: peer, $0) }
        }
        var updates: [Update] = []
        if previous.status != snapshot.status {
            updates.append(.statusChanged(peer: peer, from: previous.status, to: snapshot.status))
        }
        var before: [String: DirectMessage] = [:]
        for message in previous.messages { before[message.id] = message }
        var newlyRead = 0
        for message in snapshot.messages {
            if let old = before[message.id] {
                if message.sender == user, message.isRead, !old.isRead { newlyRead += 1 }
            } else if message.sentAt >= (previous.messages.first?.sentAt ?? .min) {
                updates.append(.message(peer: peer, message))
            }
        }
        if newlyRead > 0 { updates.append(.readByPeer(peer: peer, count: newlyRead)) }
        return updates
    }

    // MARK: Rendering

    public func listTable() -> String {
        guard !conversations.isEmpty else { return "no conversations" }
        var table = TextTable(headers: ["PEER", "STATUS", "UNREAD", "MESSAGES", "UPDATED", "LAST"])
        for peer in peers {
            guard let c = conversations[peer] else { continue }
            let last = c.messages.last.map { "\($0.sender): \(Self.clip($0.text, 40))" } ?? ""
            table.rows.append([c.peer, c.status.rawValue, String(c.unread), String(c.messages.count),
                               c.updatedAt > 0 ? Format.dateTime(c.updatedAt) : "", last])
        }
        return table.rendered()
    }

    public func conversationText(peer: String) -> String {
        guard let c = conversations[peer] else { return "no conversation with \(peer)" }
        var lines = ["\(c.peer): \(c.status.rawValue), \(c.messages.count) messages, \(c.unread) unread (version \(c.version))"]
        for message in c.messages { lines.append(Self.messageLine(message, user: user, peer: peer, withDate: true)) }
        return lines.joined(separator: "\n")
    }

    /// `[14:03:07] bob → alice: hello ✓` (the mark: my message, read by the peer).
    public static func messageLine(_ m: DirectMessage, user: String, peer: String, withDate: Bool = false) -> String {
        let to = m.sender == user ? peer : user
        let when = withDate ? Format.dateTime(m.sentAt) : Format.time(m.sentAt)
        let mark = m.sender == user && m.isRead ? " ✓" : ""
        return "[\(when)] \(m.sender) → \(to): \(m.text)\(mark)"
    }

    public func describe(_ update: Update) -> String {
        switch update {
        case .appeared(let peer, let status):
            switch status {
            case .pending: "\(peer): you asked to talk (pending)"
            case .received: "\(peer) asks to talk: accept \(peer) or decline \(peer)"
            default: "\(peer): conversation \(status.rawValue)"
            }
        case .statusChanged(let peer, let from, let to):
            "\(peer): \(from.rawValue) → \(to.rawValue)"
        case .message(let peer, let message):
            Self.messageLine(message, user: user, peer: peer)
        case .readByPeer(let peer, let count):
            "\(peer) read \(count) message\(count == 1 ? "" : "s")"
        }
    }

    static func clip(_ text: String, _ length: Int) -> String {
        let flat = text.replacing("\n", with: " ")
        return flat.count <= length ? flat : String(flat.prefix(length - 1)) + "…"
    }
}
