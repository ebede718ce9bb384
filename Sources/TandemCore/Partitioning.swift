/// How rooms, conversations and workouts are spread over partitions (CONTRACT
/// "Partitions"; docs/PROTOCOL.md "Partitions" writes the hash down for other
/// implementations): a key's 64-bit FNV-1a hash over its UTF-8 bytes, modulo the number
/// of partitions. The keys:
///
/// - a room: its roomId (`r1`);
/// - a conversation: its two userIds in byte order, joined by `/` (`alice/bob`; `/`
///   is never part of an identifier, so no two pairs share a key);
/// - a user's workouts, and everything else a user sends that names no room or
///   conversation (queries, a topic whose other levels are invalid, a DM command whose
///   peer cannot be read): the userId.
///
/// Stable across processes, versions and platforms (unlike Swift's `Hasher`, seeded per
/// process): every coordinator on one database must place a key in the same partition.
public struct Partitioning: Sendable, Equatable, CustomStringConvertible {
    /// How many partitions there are: 1 to ``maximum``.
    public let count: Int

    /// A database's partitions are fixed at its creation; more than this many leaders'
    /// sessions on one broker is not a configuration anyone should run.
    public static let maximum = 256

    public static let single = Partitioning(uncheckedCount: 1)

    /// nil unless `count` is 1 to ``maximum``.
    public init?(count: Int) {
        guard (1...Self.maximum).contains(count) else { return nil }
        self.count = count
    }

    private init(uncheckedCount: Int) { count = uncheckedCount }

    public var description: String { "\(count) partition\(count == 1 ? "" : "s")" }

    /// FNV-1a, 64 bits: offset basis 0xcbf29ce484222325, prime 0x100000001b3.
    public static func hash(_ key: some StringProtocol) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The partition of a key, 0 ..< ``count``.
    public func partition(ofKey key: some StringProtocol) -> Int {
        count == 1 ? 0 : Int(Self.hash(key) % UInt64(count))
    }

    public func partition(ofRoom roomId: String) -> Int {
        partition(ofKey: roomId)
    }

    /// The same for either order of the two users.
    public func partition(ofConversation a: String, _ b: String) -> Int {
        count == 1 ? 0 : partition(ofKey: Self.conversationKey(a, b))
    }

    /// A user's workouts, queries, and what of theirs names no room or conversation.
    public func partition(ofUser userId: String) -> Int {
        partition(ofKey: userId)
    }

    public static func conversationKey(_ a: String, _ b: String) -> String {
        a.utf8.lexicographicallyPrecedes(b.utf8) ? "\(a)/\(b)" : "\(b)/\(a)"
    }
}
