/// A binary min-heap: O(log n) push and pop, O(1) minimum: the reorder buffer's, and the
/// engine's lock deadlines. TandemCore has no dependencies, so this small one stands in
/// for swift-collections' `Heap` (the only heap in the package).
/// Inlinable so that generic users in other modules (the coordinator's
/// `ReorderBuffer<Inbound>`) get specialised code rather than metadata lookups.
public struct MinHeap<Element: Comparable> {
    @usableFromInline private(set) var storage: [Element] = []

    @inlinable public init() {}

    /// Builds a heap from any elements in O(n).
    @inlinable public init(_ elements: some Sequence<Element>) {
        storage = Array(elements)
        var i = storage.count / 2
        while i > 0 {
            i -= 1
            siftDown(from: i)
        }
    }

    @inlinable public var count: Int { storage.count }
    @inlinable public var isEmpty: Bool { storage.isEmpty }
    @inlinable public var min: Element? { storage.first }

    @inlinable public mutating func push(_ element: Element) {
        storage.append(element)
        siftUp(from: storage.count - 1)
    }

    @inlinable @discardableResult
    public mutating func popMin() -> Element? {
        guard let last = storage.popLast() else { return nil }
        guard !storage.isEmpty else { return last }
        let top = storage[0]
        storage[0] = last
        siftDown(from: 0)
        return top
    }

    @inlinable mutating func siftUp(from index: Int) {
        var child = index
        let element = storage[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard element < storage[parent] else { break }
            storage[child] = storage[parent]
            child = parent
        }
        storage[child] = element
    }

    @inlinable mutating func siftDown(from index: Int) {
        var parent = index
        let count = storage.count
        let element = storage[parent]
        while true {
            var child = 2 * parent + 1
            guard child < count else { break }
            if child + 1 < count, storage[child + 1] < storage[child] { child += 1 }
            guard storage[child] < element else { break }
            storage[parent] = storage[child]
            parent = child
        }
        storage[parent] = element
    }
}

extension MinHeap: Sendable where Element: Sendable {}
