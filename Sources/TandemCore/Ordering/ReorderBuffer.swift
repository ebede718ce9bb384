/// The reorder window (CONTRACT "Ordering"): inbound events wait up to `window` after
/// their arrival so that one with an earlier timestamp arriving a little later still
/// goes first.
///
/// When an event's window has passed it leaves together with every waiting event that
/// sorts before it, all in sort order. An event that sorts before one already released
/// is late: it still leaves (state is never rewound) and is counted in `lateCount`.
///
/// Waiting events sit in a min-heap by sort key and their deadlines in another, so
/// insert and release are O(log n) whatever order events arrive in (many users with the
/// same millisecond timestamp would make a sorted array shift on every insert).
public struct ReorderBuffer<Element> {
    public static var defaultWindow: Millis { 30 }
    public static var defaultMaxSkew: Millis { 2000 }

    /// How long each event waits after its arrival.
    public let window: Millis
    /// Events that left although they sort before one that had already left.
    @inlinable public var lateCount: Int { lates }
    @usableFromInline var lates = 0
    /// The key of the last event that left in sort order (late ones excepted).
    @inlinable public var highestReleased: OrderKey? { highest }
    @usableFromInline var highest: OrderKey?

    @usableFromInline
    struct Entry: Comparable {
        @usableFromInline var key: OrderKey
        @usableFromInline var element: Element
        @inlinable init(key: OrderKey, element: Element) {
            self.key = key
            self.element = element
        }
        @inlinable static func < (a: Entry, b: Entry) -> Bool { a.key < b.key }
        @inlinable static func == (a: Entry, b: Entry) -> Bool { a.key == b.key }
    }

    @usableFromInline
    struct Deadline: Comparable, Sendable {
        @usableFromInline var at: Millis
        @usableFromInline var key: OrderKey
        @inlinable init(at: Millis, key: OrderKey) {
            self.at = at
            self.key = key
        }
        @inlinable static func < (a: Deadline, b: Deadline) -> Bool { a.at != b.at ? a.at < b.at : a.key.arrival < b.key.arrival }
    }

    /// Waiting events by sort key.
    @usableFromInline var waiting = MinHeap<Entry>()
    /// One entry per waiting event, plus entries of events that left early with a later
    /// one (dropped lazily; the minimum is always a waiting event's).
    @usableFromInline var deadlines = MonotoneQueue<Deadline>()
    /// Arrival numbers of the waiting events, to tell stale deadlines apart.
    @usableFromInline var waitingArrivals = Set<UInt64>()
    @usableFromInline var nextArrival: UInt64 = 0

    @inlinable public init(window: Millis = ReorderBuffer.defaultWindow) {
        precondition(window >= 0, "the reorder window cannot be negative")
        self.window = window
    }

    @inlinable public var count: Int { waiting.count }
    @inlinable public var isEmpty: Bool { waiting.isEmpty }

    /// When the next event's window passes; nil when nothing waits.
    @inlinable public var nextDeadline: Millis? { deadlines.min?.at }

    /// A timestamp more than `maxSkew` ahead of the coordinator's clock becomes the clock.
    public static func clamp(timestamp: Millis, now: Millis, maxSkew: Millis = ReorderBuffer.defaultMaxSkew) -> Millis {
        guard timestamp > now else { return timestamp }
        let (ahead, overflow) = timestamp.subtractingReportingOverflow(now)
        return overflow || ahead > maxSkew ? now : timestamp
    }

    /// Adds an event that arrived at `now` (coordinator clock) with its (already clamped)
    /// timestamp and sender. Returns its key.
    @inlinable @discardableResult
    public mutating func insert(_ element: Element, timestamp: Millis, userId: String, arrival now: Millis) -> OrderKey {
        let key = OrderKey(timestamp: timestamp, userId: userId, arrival: nextArrival)
        nextArrival += 1
        waiting.push(Entry(key: key, element: element))
        waitingArrivals.insert(key.arrival)
        let (due, overflow) = now.addingReportingOverflow(window)
        deadlines.push(Deadline(at: overflow ? .max : due, key: key))
        return key
    }

    /// The events whose window has passed at `now`, with every waiting event that sorts
    /// before them, in sort order.
    @inlinable public mutating func release(now: Millis) -> [Element] {
        var cutoff: OrderKey?
        while let top = deadlines.min, top.at <= now {
            deadlines.popMin()
            guard waitingArrivals.contains(top.key.arrival) else { continue }
            if cutoff.map({ $0 < top.key }) ?? true { cutoff = top.key }
        }
        guard let cutoff else { return [] }
        return leave { $0 <= cutoff }
    }

    /// Everything still waiting, in sort order (shutdown: drain without waiting).
    @inlinable public mutating func releaseAll() -> [Element] {
        leave { _ in true }
    }

    @inlinable mutating func leave(while sortsBefore: (OrderKey) -> Bool) -> [Element] {
        var out: [Element] = []
        let before = highest
        var last: OrderKey?
        while let top = waiting.min, sortsBefore(top.key) {
            waiting.popMin()
            waitingArrivals.remove(top.key.arrival)
            if let before, top.key < before { lates += 1 }
            out.append(top.element)
            last = top.key
        }
        if let last, before.map({ $0 < last }) ?? true { highest = last }
        while let top = deadlines.min, !waitingArrivals.contains(top.key.arrival) {
            deadlines.popMin()
        }
        return out
    }
}

extension ReorderBuffer: Sendable where Element: Sendable {}
extension ReorderBuffer.Entry: Sendable where Element: Sendable {}
