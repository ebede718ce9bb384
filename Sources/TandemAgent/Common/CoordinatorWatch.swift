import TandemCore

/// What an agent says of the coordinator's status (``TandemClient/coordinatorStatus()``):
/// once when it goes offline (edits then wait and are resent) and once when it is back,
/// instead of nothing happening on the screen.
public struct CoordinatorWatch: Sendable {
    /// What the status last said (nil: nothing heard yet).
    public private(set) var online: Bool?

    public init() {}

    /// Takes a status; returns the line to print, if the news is worth one.
    public mutating func note(online now: Bool) -> (human: String, json: JSON)? {
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
