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

    @inlinable
    public static func < (a: OrderKey, b: OrderKey) -> Bool {
        if a.timestamp != b.timestamp { return a.timestamp < b.timestamp }
        // Byte order, stated rather than relying on String's Unicode ordering.
        if a.userId != b.userId { return bytesPrecede(a.userId, b.userId) }
        return a.arrival < b.arrival
    }

    /// Whether `a` sorts before `b` by their UTF-8 bytes.
    @inlinable
    public static func bytesPrecede(_ a: String, _ b: String) -> Bool {
        let fast = a.utf8.withContiguousStorageIfAvailable { pa in
            b.utf8.withContiguousStorageIfAvailable { pb -> Bool in
                let n = Swift.min(pa.count, pb.count)
                var i = 0
                while i < n {
                    if pa[i] != pb[i] { return pa[i] < pb[i] }
                    i += 1
                }
                return pa.count < pb.count
            }
        }
        if let fast, let result = fast { return result }
        return a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    public var description: String { "(\(timestamp), \(userId), #\(arrival))" }
}
