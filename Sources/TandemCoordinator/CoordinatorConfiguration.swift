import TandemCore
import TandemMQTT

/// Everything the coordinator is told at start (CONTRACT "Operating contract").
public struct CoordinatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 1883
    public var username: String?
    public var password: String?
    /// TLS to the broker (`--tls-ca-file`, `--tls-cert-file`, `--tls-key-file`); nil: plain.
    public var tls: MQTTTLS?
    public var clientId = "tandem-coordinator"
    /// The broker account the coordinator administers room access with, through
    /// mosquitto's dynamic-security plugin (`--broker-admin-username`,
    /// `--broker-admin-password-file`). nil: the broker is not administered, and reads of
    /// rooms are not restricted (writes are: the coordinator refuses non-members).
    public var brokerAdminUsername: String?
    public var brokerAdminPassword: String?
    public var databasePath = "./data/tandem.sqlite"
    public var topicRoot = Topics.defaultRoot
    /// How long each event waits for earlier-timestamped ones, in milliseconds.
    public var reorderWindowMs: Millis = 30
    /// Timestamps further ahead of our clock than this are clamped to it.
    public var maxSkewMs: Millis = 2000
    /// A lock with no accepted event from its owner on that sticker expires after this.
    public var lockLeaseMs: Millis = 30_000
    /// A lock whose owner's presence topics all went offline expires after this.
    public var presenceGraceMs: Millis = 5_000
    /// How often `coordinator/metrics` is published.
    public var metricsIntervalMs: Millis = 5_000
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
    /// The MQTT session is kept by the broker this long after we vanish.
    public var sessionExpirySeconds: UInt32 = 7 * 24 * 3600
    /// Names this process on `coordinator/instances/{instanceId}` and in the lease
    /// (`--instance-id`): by default the host name and the process id.
    public var instanceId = HealthState.defaultInstanceId()
    /// PostgreSQL: a leader that has not renewed its lease for this long is replaced
    /// (`--leader-lease-seconds`, default 5).
    public var leaderLeaseMs: Millis = 5_000

    public init() {}
}

