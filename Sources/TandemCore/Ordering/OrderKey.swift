/// Where an inbound event sorts (CONTRACT "Ordering"): by timestamp, then userId in
/// ascending byte order, then arrival order.
public struct OrderKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var timestamp: Millis
    public var userId: String
    /// The buffer's arrival counter: unique, so no two keys are equal.
    public var arrival: UInt64

    public init(timestamp: Millis, userId: String, arrival: UInt64) {
        self.timestamp = timestamp
        self.userId = userId
        self.arrival = arrival
    }

    public static func < (a: OrderKey, b: OrderKey) -> Bool {
        if a.timestamp != b.timestamp { return a.timestamp < b.timestamp }
        // Byte order, stated rather than relying on String's Unicode ordering.
        if a.userId != b.userId { return a.userId.utf8.lexicographicallyPrecedes(b.userId.utf8) }
        return a.arrival < b.arrival
    }

    public var description: String { "(\(timestamp), \(userId), #\(arrival))" }
}
