import TandemCore

/// Follows the retained `coordinator/status` for an agent, so that a person is told
/// once when the coordinator goes offline (edits then wait and are resent) and once
/// when it is back, instead of seeing nothing happen.
public struct CoordinatorWatch: Sendable {
    /// What the status last said (nil: nothing heard yet).
    public private(set) var online: Bool?

    public init() {}

    /// Takes a status payload; returns the line to print, if the news is worth one.
    public mutating func note(_ payload: [UInt8]) -> (human: String, json: JSON)? {
        guard let now = (try? JSON.parse(payload))?["online"]?.boolValue else { return nil }
        defer { online = now }
        guard now != online else { return nil }
        if !now {
            return ("the coordinator is offline: what you send waits for it and is resent", .obj(["type": "coordinator", "online": false]))
        }
        if online == false {
            return ("the coordinator is back online", .obj(["type": "coordinator", "online": true]))
        }
        return nil
    }
}
