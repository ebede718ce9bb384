import Synchronization
import TandemCore

/// What the partitions one process leads share while each runs its own pipeline
/// (CONTRACT "Partitions"): every pipeline's input feed, which of their MQTT sessions
/// are connected (`coordinator/status` says online only while all are). (Each
/// partition reconciles its own room roles at the broker: ``RoomRoleNaming``.)
final class PartitionGroup: Sendable {
    /// The partitions this process leads, in order; the first one also publishes the
    /// process's metrics and follows the broker's admin connection.
    let partitions: [Int]
    /// Each partition's feed, by its place in `partitions`.
    let feeds: [AsyncStream<CoordinatorService.Input>.Continuation]

    /// Messages each partition's session left on its own thread because another
    /// partition holds them (``TandemEngine/PartitionFilter``), by place in `partitions`:
    /// added to that partition's `messagesElsewhere` when its metrics are taken.
    let skipped: [SkippedCount]

    final class SkippedCount: Sendable {
        let value = Atomic<Int>(0)
        func add() { value.add(1, ordering: .relaxed) }
        func readAndReset() -> Int { value.exchange(0, ordering: .relaxed) }
    }

    private let connectedPartitions = Mutex<Set<Int>>([])

    init(partitions: [Int], feeds: [AsyncStream<CoordinatorService.Input>.Continuation]) {
        precondition(partitions.count == feeds.count && !partitions.isEmpty)
        self.partitions = partitions
        self.feeds = feeds
        self.skipped = partitions.map { _ in SkippedCount() }
    }

    var first: Int { partitions[0] }

    /// How many messages `partition`'s session left to the others since the last call.
    func takeSkipped(_ partition: Int) -> Int {
        guard let index = partitions.firstIndex(of: partition) else { return 0 }
        return skipped[index].readAndReset()
    }

    /// The MQTT session client id of a partition: the configured one with one partition
    /// (as before partitions existed), `{client-id}-p{k}` with more.
    static func clientId(_ base: String, partition: Int, of count: Int) -> String {
        count == 1 ? base : "\(base)-p\(partition)"
    }

    /// Every partition's pipeline gets `input`.
    func broadcast(_ input: CoordinatorService.Input) {
        for feed in feeds { feed.yield(input) }
    }

    // MARK: Connections

    /// A partition's session connected (again): true when every partition's now is, so
    /// the caller publishes the online status (a will of a partition that was cut off
    /// may have said offline meanwhile).
    func connected(_ partition: Int) -> Bool {
        connectedPartitions.withLock {
            $0.insert(partition)
            return $0.count == partitions.count
        }
    }

    /// A partition's session dropped: its will says offline for all of them.
    func disconnected(_ partition: Int) {
        _ = connectedPartitions.withLock { $0.remove(partition) }
    }
}
