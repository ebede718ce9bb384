import TandemCore

extension TandemClient {
    // MARK: Conversations

    /// This user's view of the conversation with `peer`: the retained snapshot once,
    /// then each ConversationChanges applied in order. A gap (changes that start past the
    /// held version, or a retained snapshot that may be behind) is filled in one round
    /// trip: a `dmChanges` request for what came since the held version. A listener that
    /// falls behind skips to the latest views.
    public func conversation(with peer: String) async throws -> AsyncStream<ConversationReplica> {
        if conversations[peer] == nil, allConversations == nil {
            watch(peer: peer)
            try await follow([topics.conversation(user: user, peer: peer), topics.conversationChanges(user: user, peer: peer)]) {
                $0.receive(conversation: $1)
            }
        }
        watch(peer: peer)
        return conversations[peer]!.replicas.listen()
    }

    /// Every conversation of this user, as ``conversation(with:)`` sees each: one
    /// ``ConversationReplica`` (with its `peer`) after every change of any of them,
    /// starting with those already held. Nothing is dropped.
    public func conversations() async throws -> AsyncStream<ConversationReplica> {
        try await followAllConversations()
        return allConversations!.listen(first: heldConversations)
    }

    func followAllConversations() async throws {
        if allConversations == nil {
            // Every new listener starts from the conversations held: no latest one kept.
            allConversations = Broadcast(buffering: .unbounded, keepsLatest: false)
            try await follow([topics.conversations(user: user), topics.allConversationChanges(user: user)]) {
                $0.receive(conversation: $1)
            }
        }
    }

    /// What a new listener to ``conversations()`` starts with.
    var heldConversations: [ConversationReplica] {
        conversations.values.map(\.replica).filter { $0.epoch != nil }.sorted { $0.peer < $1.peer }
    }

    /// Waits until no conversation is behind, at most `timeout`. A conversation is
    /// behind when its changes left a gap, until the answer to the `dmChanges` request it
    /// made (one round trip) or a newer snapshot fills it. Returns whether every
    /// conversation caught up.
    public func conversationsCaughtUp(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while conversations.values.contains(where: { $0.behindUntil != nil }), ContinuousClock.now < deadline {
            do { try await Task.sleep(for: .milliseconds(50)) } catch { break }
        }
        return !conversations.values.contains { $0.behindUntil != nil }
    }

    /// Sends a DM command (request, accept, decline, message, read, leave) to `peer` and
    /// returns its receipt.
    public func dm(_ type: DMCommand.Kind, to peer: String, text: String? = nil, timestamp: Millis = WallClock.now()) async throws -> Receipt {
        let command = DMCommand(commandId: ids.next(), type: type, peer: peer, timestamp: timestamp, text: text)
        return try await receipt(of: command.commandId) { post(command) }
    }

    /// Sends a DM command without waiting; its receipt comes on ``receipts()``.
    /// `label` defaults to "type peer".
    @discardableResult
    public func post(_ command: DMCommand, label: String? = nil) -> Outgoing {
        post(id: command.commandId, topic: topics.dmCommands(user: user), payload: command.json.serialized(),
             label: label ?? "\(command.type.rawValue) \(command.peer)")
    }

    private func watch(peer: String) {
        if conversations[peer] == nil {
            conversations[peer] = ConversationWatch(replica: ConversationReplica(user: user, peer: peer))
        }
    }

    /// A snapshot or ConversationChanges of one of this user's views: which one is said
    /// by the level after `conversations/` (`{peer}` or `{peer}/changes`).
    private func receive(conversation message: TransportMessage) {
        let prefix = topics.conversation(user: user, peer: "")
        guard message.topic.hasPrefix(prefix) else { return }
        if message.topic.dropFirst(prefix.count).contains("/") {
            receive(conversationChanges: message)
        } else {
            receive(conversationSnapshot: message)
        }
    }

    private func receive(conversationSnapshot message: TransportMessage) {
        guard let snapshot = read("conversation snapshot", message, ConversationSnapshot.decode), snapshot.user == user else { return }
        watch(peer: snapshot.peer)
        let taken = conversations[snapshot.peer]!.change { $0.snapshot(snapshot) }
        changed(peer: snapshot.peer, taken)
        // A retained snapshot may be up to a pacing interval behind the conversation (10 s:
        // a change at most 10 s after the snapshot went out, told live before this client
        // subscribed). Only one of a conversation that changed lately can be: ask for
        // what came since. An older one is current.
        if message.retained, WallClock.now() - snapshot.updatedAt < Self.recentlyChangedMs {
            catchUp(peer: snapshot.peer)
        }
    }

    /// A retained snapshot whose conversation changed less than this long ago may be
    /// behind: its snapshot went out at most 10 s after the change before it, and the
    /// next one within 10 s of any later change, so after 30 s (and the clocks' skew)
    /// a newer snapshot would have replaced it.
    static let recentlyChangedMs: Millis = 35_000

    private func receive(conversationChanges message: TransportMessage) {
        guard let changes = read("conversation changes", message, ConversationChanges.decode), changes.user == user else { return }
        watch(peer: changes.peer)
        // Changes do not carry the coordinator's updatedAt: this clock stands for it
        // until the next snapshot.
        let outcome = conversations[changes.peer]!.change { $0.apply(changes, now: WallClock.now()) }
        let held = conversations[changes.peer]!.replica
        if outcome == .gap, held.epoch == nil || held.version < changes.fromVersion || held.epoch != changes.epoch {
            conversations[changes.peer]!.behindUntil = max(conversations[changes.peer]!.behindUntil ?? 0, changes.toVersion)
            catchUp(peer: changes.peer)
        }
        changed(peer: changes.peer, outcome == .applied)
    }

    /// Asks for the conversation's changes since the held version (`dmChanges`), once at
    /// a time per conversation, and applies the answer: changes from that version, or the
    /// view whole when the held version is older than the last snapshot. Asked again
    /// while a later gap is still open; a refusal or no answer leaves the next snapshot
    /// to fill it.
    private func catchUp(peer: String) {
        guard let watch = conversations[peer], !watch.catchingUp else { return }
        conversations[peer]!.catchingUp = true
        Task { await self.runCatchUp(peer: peer) }
    }

    private func runCatchUp(peer: String) async {
        defer { conversations[peer]?.catchingUp = false }
        for _ in 0..<3 {
            guard let held = conversations[peer]?.replica else { return }
            let response: JSON
            do {
                response = try await query {
                    ClientRequest(requestId: $0, kind: .dmChanges, peer: peer, since: held.epoch == nil ? 0 : held.version, epoch: held.epoch).json
                }
            } catch {
                logger.info("could not catch up with the conversation with \(peer): \(error)")
                return
            }
            var taken = false
            if let whole = response["snapshot"] {
                if let snapshot = try? ConversationSnapshot(json: whole), snapshot.user == user, snapshot.peer == peer {
                    taken = conversations[peer]!.change { $0.snapshot(snapshot) }
                }
            } else if let changes = try? ConversationChanges(json: response) {
                taken = conversations[peer]!.change { $0.apply(changes, now: WallClock.now()) } == .applied
            }
            changed(peer: peer, taken)
            guard let target = conversations[peer]?.behindUntil, conversations[peer]!.replica.version < target else { return }
        }
    }

    /// Clears a gap the view has caught up with and tells the listeners when it changed.
    private func changed(peer: String, _ changed: Bool) {
        let replica = conversations[peer]!.replica
        if let target = conversations[peer]!.behindUntil, replica.version >= target {
            conversations[peer]!.behindUntil = nil
        }
        guard changed else { return }
        conversations[peer]!.replicas.send(replica)
        allConversations?.send(replica)
    }
}
