import TandemCore
import TandemStore

/// Direct messages: commands through the buffer, the full history in the store, each
/// participant's view as a retained snapshot.
extension Engine {
    mutating func ingestDMCommand(user: String, payload: [UInt8], now: Millis) -> [Publication] {
        switch DMCommand.decode(payload) {
        case .failure(let failure):
            return [receipt(.rejected(id: failure.id, kind: .dm, failure.rejection, version: nil), to: user)]
        case .success(let command):
            let item = Buffered(user: user, id: command.commandId, command: .dm(command), payload: payload)
            return admit(item, kind: .dm, timestamp: command.timestamp, currentVersion: conversationVersion(user, command.peer), now: now)
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
        let outcome = conversation.apply(command, from: user, now: now)
        if outcome.changed {
            if isNew {
                conversationCount[key.low, default: 0] += 1
                conversationCount[key.high, default: 0] += 1
            }
            conversations[key] = conversation
            changes.conversations.insert(key)
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

    func publishConversations(_ changed: Set<ConversationKey>, into step: inout Step) {
        for key in changed.sorted(by: { $0.description < $1.description }) {
            guard let conversation = conversations[key] else { continue }
            step.batch.entities.append(EntityRow(
                kind: EntityKind.conversation, key: key.description, version: conversation.version,
                body: conversation.persisted().serialized(), updatedAt: conversation.updatedAt))
            step.publications += conversationSnapshots(conversation)
        }
    }
}
