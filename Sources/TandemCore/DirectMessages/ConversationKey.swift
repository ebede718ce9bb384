/// The canonical key of the conversation between two users: their ids sorted by bytes,
/// so (alice, bob) and (bob, alice) are the same conversation.
public struct ConversationKey: Sendable, Hashable, CustomStringConvertible {
    /// The id that sorts first in byte order.
    public let low: String
    /// The id that sorts last in byte order.
    public let high: String

    public init(_ a: String, _ b: String) {
        if b.utf8.lexicographicallyPrecedes(a.utf8) {
            low = b
            high = a
        } else {
            low = a
            high = b
        }
    }

    public func contains(_ user: String) -> Bool { user == low || user == high }

    /// The other participant; `user` must be one of the two.
    public func peer(of user: String) -> String { user == low ? high : low }

    public var description: String { "\(low)|\(high)" }
}
