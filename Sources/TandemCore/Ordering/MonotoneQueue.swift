/// A min-priority queue that is O(1) when elements are pushed in non-decreasing order
/// (deadlines computed as `now + constant` from a clock that does not go back), and
/// O(log n) for the ones that are not: those go to a heap beside the in-order run.
/// Same API as `MinHeap`; inlinable for the same reason.
@usableFromInline
struct MonotoneQueue<Element: Comparable> {
    /// Elements pushed in order; those before `head` have been popped.
    @usableFromInline var run: [Element] = []
    @usableFromInline var head = 0
    /// Elements that arrived below the end of `run`.
    @usableFromInline var others = MinHeap<Element>()

    @inlinable init() {}

    @inlinable init(_ elements: some Sequence<Element>) {
        run = elements.sorted()
    }

    @inlinable var count: Int { run.count - head + others.count }
    @inlinable var isEmpty: Bool { count == 0 }

    @inlinable var min: Element? {
        let first = head < run.count ? run[head] : nil
        guard let other = others.min else { return first }
        guard let first else { return other }
        return other < first ? other : first
    }

    @inlinable mutating func push(_ element: Element) {
        if head == run.count || !(element < run[run.count - 1]) {
            run.append(element)
        } else {
            others.push(element)
        }
    }

    @inlinable @discardableResult
    mutating func popMin() -> Element? {
        if head < run.count {
            if let other = others.min, other < run[head] { return others.popMin() }
            let first = run[head]
            head += 1
            if head == run.count {
                run.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024, head * 2 >= run.count {
                run.removeFirst(head)
                head = 0
            }
            return first
        }
        return others.popMin()
    }
}

extension MonotoneQueue: Sendable where Element: Sendable {}
