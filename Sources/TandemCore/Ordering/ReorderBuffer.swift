/// The reorder window (CONTRACT "Ordering"): inbound events wait up to `window` after
/// their arrival so that one with an earlier timestamp arriving a little later still
/// goes first.
///
/// When an event's window has passed it leaves together with every waiting event that
/// sorts before it, all in sort order. An event that sorts before one already released
/// is late: it still leaves (state is never rewound) and is counted in `lateCount`.
///
/// Waiting events are kept sorted (binary-search insert; most arrivals append at the
/// end) and their deadlines in a min-heap, so insert and release are O(log n) amortised.
public struct ReorderBuffer<Element> {
    public static var defaultWindow: Millis { 30 }
    public static var defaultMaxSkew: Millis { 2000 }

    /// How long each event waits after its arrival.
    public let window: Millis
    /// Events that left although they sort before one that had already left.
    public private(set) var lateCount = 0
    /// The key of the last event that left in sort order (late ones excepted).
    public private(set) var highestReleased: OrderKey?

    fileprivate struct Entry {
        var key: OrderKey
        var element: Element
    }

    private struct Deadline: Comparable, Sendable {
        var at: Millis
        var key: OrderKey
        static func < (a: Deadline, b: Deadline) -> Bool { a.at != b.at ? a.at < b.at : a.key < b.key }
    }

    /// Sorted by key from `head` on; slots before `head` have left.
    private var waiting: [Entry] = []
    private var head = 0
    /// One entry per waiting event, plus entries of events that left early (dropped lazily;
    /// the minimum is always a waiting event's).
    private var deadlines = MinHeap<Deadline>()
    private var nextArrival: UInt64 = 0

    public init(window: Millis = ReorderBuffer.defaultWindow) {
        precondition(window >= 0, "the reorder window cannot be negative")
        self.window = window
    }

    public var count: Int { waiting.count - head }
    public var isEmpty: Bool { count == 0 }

    /// When the next event's window passes; nil when nothing waits.
    public var nextDeadline: Millis? { deadlines.min?.at }

    /// A timestamp more than `maxSkew` ahead of the coordinator's clock becomes the clock.
    public static func clamp(timestamp: Millis, now: Millis, maxSkew: Millis = ReorderBuffer.defaultMaxSkew) -> Millis {
        guard timestamp > now else { return timestamp }
        let (ahead, overflow) = timestamp.subtractingReportingOverflow(now)
        return overflow || ahead > maxSkew ? now : timestamp
    }

    /// Adds an event that arrived at `now` (coordinator clock) with its (already clamped)
    /// timestamp and sender. Returns its key.
    @discardableResult
    public mutating func insert(_ element: Element, timestamp: Millis, userId: String, arrival now: Millis) -> OrderKey {
        let key = OrderKey(timestamp: timestamp, userId: userId, arrival: nextArrival)
        nextArrival += 1
        let entry = Entry(key: key, element: element)
        if head == waiting.count || waiting[waiting.count - 1].key < key {
            waiting.append(entry)
        } else {
            waiting.insert(entry, at: insertionIndex(for: key))
        }
        let (due, overflow) = now.addingReportingOverflow(window)
        deadlines.push(Deadline(at: overflow ? .max : due, key: key))
        return key
    }

    /// The events whose window has passed at `now`, with every waiting event that sorts
    /// before them, in sort order.
    public mutating func release(now: Millis) -> [Element] {
        var cutoff: OrderKey?
        while let top = deadlines.min, top.at <= now {
            deadlines.popMin()
            guard isWaiting(top.key) else { continue }
            if cutoff.map({ $0 < top.key }) ?? true { cutoff = top.key }
        }
        guard let cutoff else { return [] }
        var end = head
        while end < waiting.count, waiting[end].key <= cutoff { end += 1 }
        return leave(upTo: end)
    }

    /// Everything still waiting, in sort order (shutdown: drain without waiting).
    public mutating func releaseAll() -> [Element] {
        let out = leave(upTo: waiting.count)
        deadlines = MinHeap()
        return out
    }

    // MARK: Internals

    private mutating func leave(upTo end: Int) -> [Element] {
        guard end > head else { return [] }
        var out: [Element] = []
        out.reserveCapacity(end - head)
        let before = highestReleased
        for index in head..<end {
            let entry = waiting[index]
            if let before, entry.key < before { lateCount += 1 }
            out.append(entry.element)
        }
        let last = waiting[end - 1].key
        if before.map({ $0 < last }) ?? true { highestReleased = last }
        head = end
        if head == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64, head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
        while let top = deadlines.min, !isWaiting(top.key) {
            deadlines.popMin()
        }
        return out
    }

    /// The first index from `head` whose key is not below `key`.
    private func insertionIndex(for key: OrderKey) -> Int {
        var low = head
        var high = waiting.count
        while low < high {
            let mid = (low + high) / 2
            if waiting[mid].key < key { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private func isWaiting(_ key: OrderKey) -> Bool {
        let index = insertionIndex(for: key)
        return index < waiting.count && waiting[index].key == key
    }
}

extension ReorderBuffer: Sendable where Element: Sendable {}
extension ReorderBuffer.Entry: Sendable where Element: Sendable {}
