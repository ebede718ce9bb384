import TandemCore

/// The rules the ``Engine`` applies: the reorder window, lock leases, limits, how long ids
/// are remembered. Defaults are the contract's; `tandem-coordinator`'s flags set them
/// (through ``CoordinatorConfiguration``, which carries one).
public struct EngineConfiguration: Sendable {
    public var topicRoot = Topics.defaultRoot
    /// How long each event waits for earlier-timestamped ones, in milliseconds.
    public var reorderWindowMs: Millis = 30
    /// Timestamps further ahead of our clock than this are clamped to it.
    public var maxSkewMs: Millis = 2000
    /// A lock with no accepted event from its owner on that sticker expires after this.
    public var lockLeaseMs: Millis = 30_000
    /// A lock whose owner's presence topics all went offline expires after this.
    public var presenceGraceMs: Millis = 5_000
    /// A running workout's snapshot is published at most this often.
    public var workoutSnapshotIntervalMs: Millis = 1_000
    /// A conversation's snapshots go out at most this often while only messages and read
    /// marks change (`--conversation-snapshot-seconds`; the contract's bound: 10 s). A
    /// status change publishes them at once.
    public var conversationSnapshotIntervalMs: Millis = 10_000
    /// Ids are remembered for duplicate detection at least this long (contract: 24 h).
    public var seenIdRetentionMs: Millis = 48 * 3600 * 1000
    /// Of those, memory holds the last few minutes (`--id-memory`); the store answers for
    /// the rest, off the pipeline (``RememberedIds``).
    public var seenIdMemoryMs: Millis = 5 * 60 * 1000
    /// What memory holds of the retention: `seenIdMemoryMs`, never more than the retention.
    public var seenIdWindowMs: Millis { min(seenIdMemoryMs, seenIdRetentionMs) }
    /// The event log (the audit trail of every processed event and its receipt) keeps
    /// rows this long (`--event-log-retention`); nil: for ever. Seven days by default:
    /// long enough to look into what a user reports after a weekend, short enough that
    /// the log does not grow for ever (about 270 bytes an event: docs/OPERATIONS.md).
    public var eventLogRetentionMs: Millis? = Self.defaultEventLogRetentionMs
    public static let defaultEventLogRetentionMs: Millis = 7 * 24 * 3600 * 1000
    /// Events, commands and telemetry a user may send per second (token bucket); 0: no
    /// limit. Over it: `rate_limited`.
    public var rateLimitPerSecond: Double = 200
    /// How many a user may send at once after being quiet.
    public var rateLimitBurst: Double = 400
    /// Live stickers a room may hold; a create beyond it: `room_full`.
    public var maxStickersPerRoom = 1000
    /// Members a room may have, owner included (`--max-room-members`); an invite beyond
    /// it: `members_full`.
    public var maxRoomMembers = 8
    /// Conversations a user may be part of; a request that would start one more:
    /// `rate_limited` (the contract has no closer code).
    public var maxConversationsPerUser = 1000

    /// How rooms, conversations and workouts are spread over partitions, and the one
    /// this engine holds: it leaves everything else alone (but presence, which every
    /// partition takes: each expires the locks of its own rooms).
    public var partitioning = Partitioning.single
    public var partition = 0

    public init() {}
}
