extension Conversation {
    /// `user`'s ConversationSnapshot, exactly as the contract shows it.
    ///
    /// - Precondition: the conversation exists and `user` is one of its participants.
    public func snapshot(for user: String, epoch: String) -> JSON {
        conversationSnapshot(for: user, epoch: epoch).json
    }

    /// `user`'s view as a value.
    ///
    /// - Precondition: the conversation exists and `user` is one of its participants.
    public func conversationSnapshot(for user: String, epoch: String) -> ConversationSnapshot {
        guard let view = view(of: user) else {
            preconditionFailure("no snapshot of \(key) for \(user): the conversation does not exist or \(user) is not in it")
        }
        return ConversationSnapshot(
            user: user, peer: key.peer(of: user), epoch: epoch, status: view.status,
            version: version, updatedAt: updatedAt, unread: view.unread, messages: Array(messages.suffix(Conversation.snapshotSize))
        )
    }

    // MARK: Persistence

    /// The conversation without its messages (the store keeps those in a table of their
    /// own): participants, both views, version and updatedAt.
    public func persisted() -> JSON {
        func viewJSON(_ view: View?) -> JSON {
            guard let view else { return .null }
            return .obj(["status": .string(view.status.rawValue), "unread": .int(Int64(view.unread))])
        }
        return .obj([
            "low": .string(key.low),
            "high": .string(key.high),
            "lowView": viewJSON(views?.low),
            "highView": viewJSON(views?.high),
            "version": .int(version),
            "updatedAt": .int(updatedAt),
        ])
    }

    /// Rebuilds a conversation from `persisted()` and its stored messages (oldest first;
    /// only the latest `windowSize` are kept in memory).
    public init(persisted json: JSON, messages: [DirectMessage] = []) throws(Rejection) {
        guard case .object = json else { throw .invalid("a persisted conversation must be an object") }
        let reader = PayloadReader(object: json)
        let key = ConversationKey(try reader.string("low"), try reader.string("high"))
        func view(_ name: String) throws(Rejection) -> View? {
            guard reader.has(name) else { return nil }
            let r = try reader.nested(name)
            let unread = try r.int64("unread")
            guard unread >= 0 else { throw .invalid("\(name).unread must not be negative") }
            return View(status: try r.oneOf("status", ConversationStatus.self), unread: Int(unread))
        }
        let views: Views?
        switch (try view("lowView"), try view("highView")) {
        case (nil, nil): views = nil
        case (let low?, let high?): views = Views(low: low, high: high)
        default: throw .invalid("a persisted conversation has both views or neither")
        }
        let version = try reader.int64("version")
        guard (version == 0) == (views == nil) else {
            throw .invalid("a persisted conversation has views exactly when its version is above 0")
        }
        self.init(key: key, views: views, version: version, updatedAt: try reader.int64("updatedAt"), messages: messages)
    }

    /// The same conversation with its in-memory window rebuilt from stored messages
    /// (oldest first; the latest `windowSize` are kept).
    public func withMessages(_ stored: [DirectMessage]) -> Conversation {
        Conversation(key: key, views: views, version: version, updatedAt: updatedAt, messages: stored)
    }
}
