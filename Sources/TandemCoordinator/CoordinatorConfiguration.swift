import TandemCore
import TandemEngine
import TandemMQTT

/// Everything the coordinator is told at start (CONTRACT "Operating contract"): where
/// the broker and the store are, who this process is, and the engine's rules.
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
    /// How often `coordinator/metrics` is published.
    public var metricsIntervalMs: Millis = 5_000
    /// At load, the least time between two turns of a pipeline's thread (``PollLoop``):
    /// what arrives meanwhile is read, decided, committed and published in one turn, one
    /// thread switch for all of it. It adds at most this much to an answer; an idle
    /// pipeline answers at once. Zero: a turn for every packet. 2 ms: at 2,000 events a
    /// second a fifth less CPU an event than 1 ms, for about half a millisecond more at
    /// p50 and p99 (docs/PERFORMANCE.md, "Turn spacing: 2 ms").
    public var turnSpacing: Duration = .milliseconds(2)
    /// The rules the engine applies (windows, leases, limits, retention), reached by
    /// their full path (`configuration.engine.reorderWindowMs`): one name per rule.
    public var engine = EngineConfiguration()
    /// The MQTT session is kept by the broker this long after we vanish.
    public var sessionExpirySeconds: UInt32 = 7 * 24 * 3600
    /// Names this process on `coordinator/instances/{instanceId}` and in the lease
    /// (`--instance-id`): by default the host name and the process id.
    public var instanceId = HealthState.defaultInstanceId()
    /// PostgreSQL: a leader that has not renewed its lease for this long is replaced
    /// (`--leader-lease-seconds`, default 5).
    public var leaderLeaseMs: Millis = 5_000
    /// PostgreSQL: a leader whose broker has said nothing for this long gives its
    /// partitions up, and a standby takes a lease only while it heard the broker within
    /// it (`--broker-silence-seconds`, default 3; ``BrokerLink``).
    public var brokerSilenceMs: Millis = 3_000

    public init() {}
}

