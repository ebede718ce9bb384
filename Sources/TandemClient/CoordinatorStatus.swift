import TandemCore

/// The coordinator's retained `coordinator/status`: whether it is there to judge what
/// clients send. While it is offline, events and commands wait at the broker and are
/// resent; nothing is lost, but no receipt comes.
public struct CoordinatorStatus: Sendable, Equatable {
    public var online: Bool
    /// When the coordinator that is online started (nil when offline).
    public var startedAt: Millis?
    /// Its version (nil when offline).
    public var version: String?

    public init(online: Bool, startedAt: Millis? = nil, version: String? = nil) {
        self.online = online
        self.startedAt = startedAt
        self.version = version
    }

    /// Reads a status payload; nil when it is not one (`online` missing or not a bool).
    public static func decode(_ payload: [UInt8]) -> CoordinatorStatus? {
        guard let json = try? JSON.parse(payload), let online = json["online"]?.boolValue else { return nil }
        return CoordinatorStatus(online: online, startedAt: json["startedAt"]?.int64Value, version: json["version"]?.stringValue)
    }
}
