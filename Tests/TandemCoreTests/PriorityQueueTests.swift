import Testing
@testable import TandemCore

@Suite struct PriorityQueueTests {
    /// Mostly in-order pushes with some out-of-order ones, interleaved with pops: both
    /// queues must give what a sorted list gives.
    @Test(arguments: 1...20)
    func popsInOrder(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed))
        var heap = MinHeap<Int>()
        var queue = MonotoneQueue<Int>()
        var reference: [Int] = []
        var clock = 0
        for _ in 0..<1_500 {
            if Int.random(in: 0..<3, using: &rng) == 0, !reference.isEmpty {
                let expected = reference.removeFirst()
                #expect(heap.popMin() == expected)
                #expect(queue.popMin() == expected)
            } else {
                clock += Int.random(in: 0...2, using: &rng)
                let value = Int.random(in: 0..<10, using: &rng) == 0 ? clock - Int.random(in: 1...50, using: &rng) : clock
                heap.push(value)
                queue.push(value)
                reference.insert(value, at: reference.firstIndex(where: { $0 > value }) ?? reference.count)
            }
            #expect(heap.min == reference.first && queue.min == reference.first)
            #expect(heap.count == reference.count && queue.count == reference.count)
        }
        #expect(MinHeap([5, 3, 9, 1]).min == 1)
        #expect(MonotoneQueue([5, 3, 9, 1]).min == 1)
    }

    @Test func equalDeadlinesExpireInCreationOrder() {
        var room = RoomState(roomId: "r")
        for id in ["z", "m", "a"] { room.must(.create, id, by: "alice", now: 1_000) }
        #expect(room.expireLeases(now: 31_000).map(\.stickerId) == ["z", "m", "a"])
    }
}
