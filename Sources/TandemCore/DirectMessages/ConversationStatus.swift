/// One participant's view of a conversation (CONTRACT "Direct messages").
public enum ConversationStatus: String, Sendable, CaseIterable {
    /// I asked; the peer has not answered.
    case pending
    /// The peer asked; I have not answered.
    case received
    case active
    case declined
    case left
}
