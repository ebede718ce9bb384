/// Who is online, from the retained `presence/{userId}/{clientId}` topics, and whose
/// locks must go because every one of their clients went offline a grace period ago.
///
/// A user who never published presence is unknown here: their locks are subject to the
/// lease alone. Coming back online within the grace cancels it.
public struct PresenceTracker: Sendable, Equatable {
    public let grace: Millis
    /// user -> clientId -> online
    private var clients: [String: [String: Bool]] = [:]
    /// user -> when the grace runs out (every client offline).
    private var graceDeadlines: [String: Millis] = [:]

    public init(grace: Millis) {
        self.grace = grace
    }

    /// Reads a presence payload: `{"online":true}` / `{"online":false}`; an empty
    /// payload (a cleared retained message) means the client is gone. Nil: unreadable.
    public static func parse(_ payload: [UInt8]) -> Bool?? {
        if payload.isEmpty { return .some(nil) }
        guard let json = try? JSON.parse(payload), let online = json["online"]?.boolValue else { return nil }
        return .some(online)
    }

    /// Records one client's presence (`nil`: the client's topic was cleared).
    public mutating func update(user: String, clientId: String, online: Bool?, now: Millis) {
        var mine = clients[user] ?? [:]
        mine[clientId] = online
        clients[user] = mine
        if mine.values.contains(true) {
            graceDeadlines[user] = nil
        } else if graceDeadlines[user] == nil {
            graceDeadlines[user] = now + grace
        }
    }

    /// `true` online, `false` every known client offline, `nil` never seen.
    public func isOnline(_ user: String) -> Bool? {
        guard let mine = clients[user], !mine.isEmpty else { return nil }
        return mine.values.contains(true)
    }

    public var nextDeadline: Millis? { graceDeadlines.values.min() }

    /// Users whose grace ran out by `now`; each is reported once.
    public mutating func takeExpired(now: Millis) -> [String] {
        let due = graceDeadlines.filter { $0.value <= now }.map(\.key).sorted()
        for user in due { graceDeadlines[user] = nil }
        return due
    }
}
