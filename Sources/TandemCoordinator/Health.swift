#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import TandemCore

/// What this coordinator process is doing, as `GET /healthz` tells it.
public enum CoordinatorRole: Sendable, Equatable {
    /// Opening the store, recovering, connecting: not serving yet.
    case starting
    /// Ready to take over from the leader (a store with a leader lease).
    case standby
    /// Holds the lead under fencing `term`; `online` once `{"online":true}` is published,
    /// false while the broker connection is down.
    case leader(term: Int64, online: Bool)
    /// Draining after SIGTERM/SIGINT or an error: no new work.
    case stopping

    /// Whether a load balancer or an orchestrator should count this process as healthy:
    /// the online leader or a ready standby.
    public var isHealthy: Bool {
        switch self {
        case .leader(_, let online): online
        case .standby: true
        case .starting, .stopping: false
        }
    }

    public var name: String {
        switch self {
        case .starting: "starting"
        case .standby: "standby"
        case .leader: "leader"
        case .stopping: "stopping"
        }
    }
}

/// The coordinator's role, shared between the service that changes it and the HTTP
/// handler that reads it (`/healthz`), plus the name of this process.
public final class HealthState: Sendable {
    /// This process's name (`--instance-id`; default: host name and process id).
    public let instanceId: String
    private let current = Mutex(CoordinatorRole.starting)

    public init(instanceId: String = HealthState.defaultInstanceId()) {
        self.instanceId = instanceId
    }

    public var role: CoordinatorRole {
        get { current.withLock { $0 } }
        set { current.withLock { $0 = newValue } }
    }

    /// Marks the leader online or offline (the broker connection came or went); any other
    /// role is left as it is.
    public func setOnline(_ online: Bool) {
        current.withLock { role in
            if case .leader(let term, _) = role { role = .leader(term: term, online: online) }
        }
    }

    /// `GET /healthz`: 200 with the role when healthy, else 503; the body one JSON line,
    /// e.g. `{"status":"leader","online":true,"instance":"host-12","term":3}`.
    public var report: (healthy: Bool, body: String) {
        let role = self.role
        var members: [JSON.Member] = [JSON.Member("status", .string(role.name))]
        if case .leader(let term, let online) = role {
            members.append(JSON.Member("online", .bool(online)))
            members.append(JSON.Member("instance", .string(instanceId)))
            members.append(JSON.Member("term", .int(term)))
        } else {
            members.append(JSON.Member("instance", .string(instanceId)))
        }
        return (role.isHealthy, String(decoding: JSON.object(members).serialized(), as: UTF8.self))
    }

    /// `HOST-PID`, cut to what an identifier may hold (a topic level: 1-64 of
    /// `[A-Za-z0-9_.-]`; anything else in the host name becomes `-`).
    public static func defaultInstanceId() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            : ""
        return instanceId(host: host, pid: Int(getpid()))
    }

    static func instanceId(host: String, pid: Int) -> String {
        let suffix = "-\(pid)"
        let allowed = host.unicodeScalars.map { scalar -> Character in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "_", ".", "-": Character(scalar)
            default: "-"
            }
        }
        let name = String(allowed.prefix(64 - suffix.count))
        return (name.isEmpty ? "coordinator" : name) + suffix
    }
}
