import Testing
@testable import TandemCore

@Suite struct ReorderBufferTests {
    typealias Buffer = ReorderBuffer<String>

    @Test func anEventWaitsForItsWindow() {
        var buffer = Buffer(window: 30)
        buffer.insert("a", timestamp: 100, userId: "alice", arrival: 1_000)
        #expect(buffer.nextDeadline == 1_030)
        #expect(buffer.release(now: 1_029).isEmpty)
        #expect(buffer.release(now: 1_030) == ["a"])
        #expect(buffer.isEmpty && buffer.nextDeadline == nil)
    }

    @Test func theDefaultWindowIs30ms() {
        var buffer = Buffer()
        #expect(buffer.window == 30)
        buffer.insert("a", timestamp: 1, userId: "u", arrival: 0)
        #expect(buffer.nextDeadline == 30)
    }

    @Test func tiesGoByUserIdBytesThenArrival() {
        var buffer = Buffer(window: 30)
        buffer.insert("bob-1", timestamp: 100, userId: "bob", arrival: 0)
        buffer.insert("alice-1", timestamp: 100, userId: "alice", arrival: 0)
        buffer.insert("bob-2", timestamp: 100, userId: "bob", arrival: 0)
        buffer.insert("Zed-1", timestamp: 100, userId: "Zed", arrival: 0)
        buffer.insert("alice.x", timestamp: 100, userId: "alice.x", arrival: 0)
        buffer.insert("early", timestamp: 99, userId: "zz", arrival: 0)
        // "Z" (0x5A) sorts before "a" (0x61); "alice" before "alice.x".
        #expect(buffer.release(now: 30) == ["early", "Zed-1", "alice-1", "alice.x", "bob-1", "bob-2"])
    }

    @Test func anEarlierEventArrivingWithinTheWindowGoesFirst() {
        var buffer = Buffer(window: 30)
        buffer.insert("later", timestamp: 100, userId: "alice", arrival: 0)
        buffer.insert("earlier", timestamp: 90, userId: "bob", arrival: 20)
        // The first event's window passes at 30; the second sorts before it and leaves with it.
        #expect(buffer.release(now: 30) == ["earlier", "later"])
        #expect(buffer.nextDeadline == nil, "the second event's deadline went with it")
        #expect(buffer.lateCount == 0)
    }

    @Test func anEventThatSortsAfterWaitsForItsOwnWindow() {
        var buffer = Buffer(window: 30)
        buffer.insert("first", timestamp: 100, userId: "alice", arrival: 0)
        buffer.insert("second", timestamp: 200, userId: "alice", arrival: 10)
        #expect(buffer.release(now: 30) == ["first"])
        #expect(buffer.nextDeadline == 40)
        #expect(buffer.release(now: 39).isEmpty)
        #expect(buffer.release(now: 40) == ["second"])
    }

    @Test func anEventThatSortsBeforeReleasedOnesIsLateButStillLeaves() {
        var buffer = Buffer(window: 30)
        buffer.insert("a", timestamp: 100, userId: "alice", arrival: 0)
        #expect(buffer.release(now: 30) == ["a"])
        buffer.insert("b", timestamp: 90, userId: "bob", arrival: 35)
        buffer.insert("c", timestamp: 150, userId: "bob", arrival: 36)
        #expect(buffer.release(now: 64).isEmpty)
        #expect(buffer.release(now: 65) == ["b"])
        #expect(buffer.lateCount == 1)
        #expect(buffer.release(now: 66) == ["c"])
        #expect(buffer.lateCount == 1)
        #expect(buffer.highestReleased?.timestamp == 150)
    }

    @Test func aZeroWindowReleasesAtOnce() {
        var buffer = Buffer(window: 0)
        buffer.insert("a", timestamp: 5, userId: "u", arrival: 7)
        #expect(buffer.release(now: 7) == ["a"])
    }

    @Test func releaseAllDrainsInSortOrder() {
        var buffer = Buffer(window: 30)
        buffer.insert("b", timestamp: 2, userId: "u", arrival: 0)
        buffer.insert("a", timestamp: 1, userId: "u", arrival: 0)
        #expect(buffer.releaseAll() == ["a", "b"])
        #expect(buffer.isEmpty && buffer.nextDeadline == nil)
    }

    @Test func clampsOnlyTimestampsTooFarAhead() {
        #expect(Buffer.clamp(timestamp: 12_000, now: 10_000, maxSkew: 2_000) == 12_000)
        #expect(Buffer.clamp(timestamp: 12_001, now: 10_000, maxSkew: 2_000) == 10_000)
        #expect(Buffer.clamp(timestamp: 3, now: 10_000, maxSkew: 2_000) == 3)
        #expect(Buffer.clamp(timestamp: .max, now: 10_000) == 10_000)
        #expect(Buffer.clamp(timestamp: .max, now: -5) == -5)
        #expect(Buffer.clamp(timestamp: .min, now: .max) == .min)
        #expect(Buffer.defaultMaxSkew == 2_000)
    }

    /// Whatever order events arrive in, if they all arrive before any window passes they
    /// leave in sort order.
    @Test(arguments: 1...50)
    func anyArrivalOrderWithinOneWindowLeavesSorted(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed))
        let users = ["alice", "bob", "Carol", "dave_2"]
        var items: [(timestamp: Millis, user: String, label: String)] = []
        for i in 0..<Int.random(in: 1...60, using: &rng) {
            items.append((Millis.random(in: 0...20, using: &rng), users.randomElement(using: &rng)!, "e\(i)"))
        }
        items.shuffle(using: &rng)
        var buffer = Buffer(window: 30)
        for (n, item) in items.enumerated() {
            buffer.insert(item.label, timestamp: item.timestamp, userId: item.user, arrival: Millis(n % 30))
        }
        let out = buffer.release(now: 1_000)
        // Stable sort by (timestamp, user bytes) keeps arrival order for ties.
        let expected = items.enumerated().sorted { a, b in
            if a.element.timestamp != b.element.timestamp { return a.element.timestamp < b.element.timestamp }
            if a.element.user != b.element.user { return a.element.user.utf8.lexicographicallyPrecedes(b.element.user.utf8) }
            return a.offset < b.offset
        }.map(\.element.label)
        #expect(out == expected)
    }

    /// Random arrivals, released every millisecond: nothing waits longer than its window,
    /// output is in sort order except late events, and `lateCount` counts exactly those.
    @Test(arguments: 1...30)
    func nothingWaitsLongerThanItsWindow(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed) &* 7919)
        let window = Millis.random(in: 0...40, using: &rng)
        var buffer = ReorderBuffer<OrderKey>(window: window)
        var arrivals: [UInt64: Millis] = [:]
        var now: Millis = 0
        var released: [OrderKey] = []
        var lateSeen = 0
        var highest: OrderKey?
        func releaseDue(at time: Millis) {
            let out = buffer.release(now: time)
            for key in out {
                #expect(time - arrivals[key.arrival]! <= window)
                if let highest, key < highest { lateSeen += 1 }
            }
            if let last = out.max() { highest = max(highest ?? last, last) }
            #expect(zip(out, out.dropFirst()).allSatisfy { $0 < $1 }, "each batch is sorted")
            if let deadline = buffer.nextDeadline { #expect(deadline > time) }
            released += out
        }
        for _ in 0..<2_000 {
            let next = now + Millis.random(in: 0...3, using: &rng)
            // Wake at every deadline in between, as the coordinator does.
            while let deadline = buffer.nextDeadline, deadline <= next { releaseDue(at: max(deadline, now)) }
            now = next
            releaseDue(at: now)
            for _ in 0..<Int.random(in: 0...2, using: &rng) {
                let timestamp = now + Millis.random(in: -60...5, using: &rng)
                let user = ["a", "b", "c"].randomElement(using: &rng)!
                let key = OrderKey(timestamp: timestamp, userId: user, arrival: UInt64(arrivals.count))
                buffer.insert(key, timestamp: timestamp, userId: user, arrival: now)
                arrivals[key.arrival] = now
            }
            releaseDue(at: now)
        }
        while let deadline = buffer.nextDeadline { releaseDue(at: deadline) }
        #expect(buffer.isEmpty)
        #expect(released.count == arrivals.count)
        #expect(Set(released.map(\.arrival)).count == arrivals.count)
        #expect(buffer.lateCount == lateSeen)
    }

    @Test func inOrderArrivalsStayCheap() {
        var buffer = ReorderBuffer<Int>(window: 30)
        var total = 0
        for i in 0..<200_000 {
            buffer.insert(i, timestamp: Millis(i), userId: "u", arrival: Millis(i / 10))
            total += buffer.release(now: Millis(i / 10)).count
        }
        total += buffer.releaseAll().count
        #expect(total == 200_000)
    }
}
