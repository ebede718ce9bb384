import TandemCore

/// Direct messages: commands through the buffer, the full history in the store, each
/// participant's view as ConversationChanges per batch and a paced retained snapshot.
extension Engine {
    /// What one batch did to one conversation.
    struct ConversationBatch {
        var changes: [ConversationChange] = []
        /// Whether a status of either view changed: then the snapshots go out at once.
        var statusChanged = false
    }

    mutating func ingestDMCommand(user: String, payload: [UInt8], now: Millis) -> [Publication] {
        do throws(DecodeFailure) {
            let command = try DMCommand.decode(payload)
            let item = Buffered(user: user, id: command.commandId, command: .dm(command), payload: payload)
            return admit(item, kind: .dm, timestamp: command.timestamp, currentVersion: conversationVersion(user, command.peer), now: now)
        } catch {
            return [receipt(.rejected(id: error.id, kind: .dm, error.rejection, version: nil), to: user, arrivedAt: now)]
        }
    }

    func conversationVersion(_ user: String, _ peer: String) -> Int64? {
        guard user != peer, let c = conversations[ConversationKey(user, peer)], c.exists else { return nil }
        return c.version
    }

    mutating func applyDMCommand(_ command: DMCommand, user: String, now: Millis, changes: inout BatchChanges, batch: inout StoreBatch) -> Receipt {
        if command.peer == user {
            return .rejected(id: command.commandId, kind: .dm, Rejection(.selfConversation, "you cannot hold a conversation with yourself"), version: nil)
        }
        let key = ConversationKey(user, command.peer)
        let isNew = conversations[key] == nil
        if isNew, command.type == .request,
           let full = [user, command.peer].first(where: { conversationCount[$0, default: 0] >= configuration.maxConversationsPerUser }) {
            return .rejected(id: command.commandId, kind: .dm, Rejection(.rateLimited, "\(full) is in \(configuration.maxConversationsPerUser) conversations, the most one may be"), version: nil)
        }
        var conversation = conversations[key] ?? Conversation(key: key)
        let before = conversation.views
        let outcome = conversation.apply(command, from: user, now: wall)
        if outcome.changed {
            var messages = outcome.newMessages
            if !outcome.markedRead.isEmpty {
                let marked = Set(outcome.markedRead)
                messages += conversation.messages.filter { marked.contains($0.id) }
            }
            let after = conversation.views
            var record = changes.conversations[key] ?? ConversationBatch()
            record.changes.append(ConversationChange(
                version: conversation.version, commandId: command.commandId, sender: user, type: command.type, messages: messages))
            if before?.low.status != after?.low.status || before?.high.status != after?.high.status {
                record.statusChanged = true
            }
            changes.conversations[key] = record
            if isNew {
                conversationCount[key.low, default: 0] += 1
                conversationCount[key.high, default: 0] += 1
            }
            conversations[key] = conversation
            var seq = messageSeq[key] ?? 0
            if let sender = outcome.readFrom {
                batch.readMarks.append(DMReadMark(conversation: key.description, sender: sender, throughSeq: seq))
            }
            for message in outcome.newMessages {
                seq += 1
                batch.messages.append(DMMessageRow(
                    conversation: key.description, seq: seq, id: message.id, sender: message.sender,
                    text: message.text, sentAt: message.sentAt, isRead: message.isRead))
            }
            messageSeq[key] = seq
        }
        return outcome.receipt(id: command.commandId)
    }

    func conversationSnapshots(_ conversation: Conversation) -> [Publication] {
        [conversation.key.low, conversation.key.high].map { user in
            let peer = conversation.key.peer(of: user)
            return Publication(
                topic: topics.conversation(user: user, peer: peer),
                payload: conversation.snapshot(for: user, epoch: epoch).serialized(), retain: true)
        }
    }

    /// Each participant's ConversationChanges for what the batch changed.
    func conversationChanges(_ conversation: Conversation, _ record: ConversationBatch) -> [Publication] {
        guard let first = record.changes.first, let last = record.changes.last else { return [] }
        return [conversation.key.low, conversation.key.high].compactMap { user in
            guard let view = conversation.view(of: user) else { return nil }
            let peer = conversation.key.peer(of: user)
            let message = ConversationChanges(
                user: user, peer: peer, epoch: epoch, fromVersion: first.version - 1, toVersion: last.version,
                status: view.status, unread: view.unread, changes: record.changes)
            return Publication(topic: topics.conversationChanges(user: user, peer: peer), payload: message.json.serialized())
        }
    }

    /// Persists and publishes the conversations a batch changed: changes at once, then
    /// the snapshots at once on a status change or when none went out in the last
    /// second, else when the second is up (``collectConversationSnapshots(now:into:)``).
    mutating func publishConversations(_ changed: [ConversationKey: ConversationBatch], now: Millis, into step: inout Step) {
        for key in changed.keys.sorted(by: { $0.description < $1.description }) {
            guard let conversation = conversations[key], let record = changed[key] else { continue }
            step.batch.entities.append(EntityRow(
                kind: EntityKind.conversation, key: key.description, version: conversation.version,
                body: conversation.persisted().serialized(), updatedAt: conversation.updatedAt))
            step.publications += conversationChanges(conversation, record)
            let last = conversationLastSnapshot[key]
            let interval = configuration.conversationSnapshotIntervalMs
            if record.statusChanged || last.map({ now - $0 >= interval }) ?? true {
                step.publications += conversationSnapshots(conversation)
                conversationLastSnapshot[key] = now
                conversationSnapshotDue[key] = nil
                conversationChangesSinceSnapshot[key] = nil
            } else {
                conversationChangesSinceSnapshot[key, default: []] += record.changes
                if conversationSnapshotDue[key] == nil, let last {
                    conversationSnapshotDue[key] = last + interval
                }
            }
        }
        collectConversationSnapshots(now: now, into: &step)
    }

    /// The paced snapshots whose second is up.
    mutating func collectConversationSnapshots(now: Millis, into step: inout Step) {
        guard !conversationSnapshotDue.isEmpty else { return }
        let due = conversationSnapshotDue.filter { $0.value <= now }.keys.sorted(by: { $0.description < $1.description })
        for key in due {
            conversationSnapshotDue[key] = nil
            conversationChangesSinceSnapshot[key] = nil
            guard let conversation = conversations[key] else { continue }
            step.publications += conversationSnapshots(conversation)
            conversationLastSnapshot[key] = now
        }
        if conversationLastSnapshot.count > 4 * Self.conversationPacingKept {
            let interval = configuration.conversationSnapshotIntervalMs
            conversationLastSnapshot = conversationLastSnapshot.filter { now - $0.value < interval }
        }
    }

    /// How many conversations' last snapshot times are kept before the stale ones (older
    /// than the pacing interval, which no longer pace anything) are dropped.
    static var conversationPacingKept: Int { 2_500 }

    /// The answer to a `dmChanges` request: the asker's view from `since` to now as a
    /// ConversationChanges (with `requestId` and `type`), from the changes held since the
    /// conversation's last snapshot; or, when `since` is older than that snapshot (or of
    /// another epoch), `{"requestId","type","peer","snapshot":{...}}`, the view whole.
    /// The answer describes applied state: like any answer given at once it waits
    /// behind the commit in flight.
    func dmChangesResponse(_ request: ClientRequest, from user: String) -> JSON {
        let peer = request.peer ?? ""
        let since = request.since ?? 0
        let head: [JSON.Member] = [.init("requestId", .string(request.requestId)), .init("type", .string(request.kind.rawValue))]
        if peer == user {
            return ClientRequest.errorResponse(requestId: request.requestId, kind: request.kind.rawValue,
                                               Rejection(.selfConversation, "you cannot hold a conversation with yourself"))
        }
        let key = ConversationKey(user, peer)
        guard let conversation = conversations[key], let view = conversation.view(of: user) else {
            return ClientRequest.errorResponse(requestId: request.requestId, kind: request.kind.rawValue,
                                               Rejection(.notFound, "there is no conversation with \(peer)"))
        }
        let held = conversationChangesSinceSnapshot[key] ?? []
        // The held changes cover the versions after the last snapshot's.
        let snapshotVersion = (held.first?.version ?? conversation.version + 1) - 1
        guard request.epoch == nil || request.epoch == epoch, since >= snapshotVersion, since <= conversation.version else {
            return .object(head + [
                .init("peer", .string(peer)),
                .init("snapshot", conversation.snapshot(for: user, epoch: epoch)),
            ])
        }
        let changes = ConversationChanges(
            user: user, peer: peer, epoch: epoch, fromVersion: since, toVersion: conversation.version,
            status: view.status, unread: view.unread, changes: held.filter { $0.version > since })
        guard case .object(let members) = changes.json else { return changes.json }
        return .object(head + members)
    }
}
