import CoreMetrics
import Synchronization
import TandemCore
import TandemEngine

/// The coordinator's metrics in swift-metrics, named for Prometheus.
///
/// The ``Engine`` counts into its own ``Metrics`` value and imports no metrics library.
/// The pipeline hands that value over after every input (``observe(_:)``: one copy
/// under a lock, nothing computed), and ``mirror()`` adds what each counter gained since
/// the last mirror to its swift-metrics counter and sets the gauges. The HTTP server
/// mirrors right before it renders `/metrics`, and the pipeline on every metrics tick, so
/// a scrape sees every receipt already sent. Timings (commit, batch size, receipt
/// latency), store errors and the broker connection are recorded here directly by the
/// service.
public final class MetricsExporter: Sendable {
    /// Metric names, as Prometheus shows them.
    public enum Name {
        public static let messagesReceived = "tandem_messages_received_total"
        public static let messagesPublished = "tandem_messages_published_total"
        public static let events = "tandem_events_total"
        public static let rejections = "tandem_rejections_total"
        public static let queriesRefused = "tandem_queries_refused_total"
        public static let lateEvents = "tandem_late_events_total"
        public static let clampedTimestamps = "tandem_clamped_timestamps_total"
        public static let idStoreChecks = "tandem_id_store_checks_total"
        public static let telemetryAccepted = "tandem_telemetry_accepted_total"
        public static let lockExpiries = "tandem_lock_expiries_total"
        public static let publishErrors = "tandem_publish_errors_total"
        public static let storeErrors = "tandem_store_errors_total"
        public static let reconnects = "tandem_mqtt_reconnects_total"
        public static let connected = "tandem_mqtt_connected"
        public static let bufferDepth = "tandem_buffer_depth"
        public static let republishRemaining = "tandem_republish_remaining"
        public static let rooms = "tandem_rooms"
        public static let conversations = "tandem_conversations"
        public static let workouts = "tandem_workouts"
        public static let rememberedIds = "tandem_remembered_ids"
        public static let commitSeconds = "tandem_commit_seconds"
        public static let batchSize = "tandem_batch_size"
        public static let receiptSeconds = "tandem_receipt_seconds"
        public static let leader = "tandem_leader"
        public static let leaderTerm = "tandem_leader_term"
        public static let termsStarted = "tandem_terms_started_total"
        public static let leasesLost = "tandem_leases_lost_total"
        /// Per partition this process leads (`partition` label); the series above are the sums.
        public static let partitionMessagesReceived = "tandem_partition_messages_received_total"
        public static let partitionBufferDepth = "tandem_partition_buffer_depth"
    }

    /// Histogram buckets. Commits take a fraction of a millisecond to a few; a receipt
    /// waits out the reorder window (30 ms) plus the commit; a batch holds 1 to thousands.
    public static let commitBuckets: [Duration] = [
        .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2500), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(5),
    ]
    /// The receipt buckets for a reorder window of `reorderWindowMs`: besides the coarse
    /// ones, the window itself and 1, 2, 3, 5 and 10 ms above it, so that the
    /// coordinator's own share of an applied event's latency (the commit, the wait for the
    /// batch in flight, scheduling) reads straight off the histogram, at the resolution of
    /// the millisecond tick: `histogram_quantile(0.99, ...)` minus the window.
    public static func receiptBuckets(reorderWindowMs window: Millis) -> [Duration] {
        let coarse: [Millis] = [1, 5, 10, 25, 35, 50, 75, 100, 250, 500, 1_000, 2_500, 5_000, 10_000]
        let nearWindow = window > 0 ? [0, 1, 2, 3, 5, 10].map { window + $0 } : []
        return Set(coarse + nearWindow).sorted().map { .milliseconds($0) }
    }
    public static let batchBuckets: [Double] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    static let receiptKinds: [Receipt.Kind] = [.room, .dm, .workout]
    static let statuses: [Receipt.Status] = [.accepted, .rejected, .duplicate]

    /// What store operation failed (`tandem_store_errors_total{operation}`).
    public enum StoreOperation: String, Sendable, CaseIterable {
        /// A batch's transaction: the coordinator stops after it.
        case commit
        /// A DM history or logbook read: answered with an error, the coordinator goes on.
        case query
        /// Reading the state at the start of a term (a restart, or a takeover).
        case recover
    }

    let received: [Metrics.InboundKind: Counter]
    let published: Counter
    let events: [Metrics.ReceiptTally: Counter]
    let rejections: [ReceiptCode: Counter]
    let queriesRefused: Counter
    let lateEvents: Counter
    let clampedTimestamps: Counter
    let idStoreChecks: Counter
    let telemetryAccepted: Counter
    let lockExpiries: Counter
    let publishErrors: Counter
    let storeErrors: [StoreOperation: Counter]
    let reconnects: Counter
    let connected: Gauge
    let bufferDepth: Gauge
    let republishRemaining: Gauge
    let rooms: Gauge
    let conversations: Gauge
    let workouts: Gauge
    let rememberedIds: Gauge
    let commitSeconds: Timer
    let batchSize: Recorder
    let receiptSeconds: [Receipt.Kind: Timer]
    let leader: Gauge
    let leaderTerm: Gauge
    let termsStarted: Counter
    let leasesLost: Counter

    struct State {
        /// Each partition's latest counts and levels (one entry with one partition).
        var latest: [Int: Metrics] = [:]
        var gauges: [Int: Metrics.Gauges] = [:]
        /// The sums as last mirrored, and each partition's messages in.
        var mirrored = Metrics()
        var mirroredIn: [Int: Int] = [:]
        /// What partitions this process no longer leads had counted: kept in the sums, so
        /// that every counter only grows (``forget(partition:)``).
        var retired = Metrics()
        var partitionReceived: [Int: Counter] = [:]
        var partitionDepth: [Int: Gauge] = [:]
    }

    let factory: any MetricsFactory

    let state = Mutex(State())

    /// Every metric is made here, so each series is exported from the start (at 0).
    /// `factory`: where they go (the executable's Prometheus factory; by default
    /// whatever `MetricsSystem` was bootstrapped with, which is nothing in tests).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        func counter(_ name: String, _ dimensions: [(String, String)] = []) -> Counter {
            Counter(label: name, dimensions: dimensions, factory: factory)
        }
        func gauge(_ name: String) -> Gauge { Gauge(label: name, factory: factory) }
        self.factory = factory
        received = Dictionary(uniqueKeysWithValues: Metrics.InboundKind.allCases.map {
            ($0, counter(Name.messagesReceived, [("kind", $0.rawValue)]))
        })
        published = counter(Name.messagesPublished)
        var events: [Metrics.ReceiptTally: Counter] = [:]
        for kind in Self.receiptKinds {
            for status in Self.statuses {
                events[Metrics.ReceiptTally(kind, status)] = counter(Name.events, [("kind", kind.rawValue), ("status", status.rawValue)])
            }
        }
        self.events = events
        rejections = Dictionary(uniqueKeysWithValues: ReceiptCode.allCases.map { ($0, counter(Name.rejections, [("code", $0.rawValue)])) })
        queriesRefused = counter(Name.queriesRefused)
        lateEvents = counter(Name.lateEvents)
        clampedTimestamps = counter(Name.clampedTimestamps)
        idStoreChecks = counter(Name.idStoreChecks)
        telemetryAccepted = counter(Name.telemetryAccepted)
        lockExpiries = counter(Name.lockExpiries)
        publishErrors = counter(Name.publishErrors)
        storeErrors = Dictionary(uniqueKeysWithValues: StoreOperation.allCases.map { ($0, counter(Name.storeErrors, [("operation", $0.rawValue)])) })
        reconnects = counter(Name.reconnects)
        connected = gauge(Name.connected)
        bufferDepth = gauge(Name.bufferDepth)
        republishRemaining = gauge(Name.republishRemaining)
        rooms = gauge(Name.rooms)
        conversations = gauge(Name.conversations)
        workouts = gauge(Name.workouts)
        rememberedIds = gauge(Name.rememberedIds)
        commitSeconds = Timer(label: Name.commitSeconds, factory: factory)
        batchSize = Recorder(label: Name.batchSize, aggregate: true, factory: factory)
        receiptSeconds = Dictionary(uniqueKeysWithValues: Self.receiptKinds.map {
            ($0, Timer(label: Name.receiptSeconds, dimensions: [("kind", $0.rawValue)], factory: factory))
        })
        leader = gauge(Name.leader)
        leaderTerm = gauge(Name.leaderTerm)
        termsStarted = counter(Name.termsStarted)
        leasesLost = counter(Name.leasesLost)
        connected.record(0)
        leader.record(0)
    }

    // MARK: Counters, mirrored from the engine

    /// Keeps the engine's latest counts and levels for the next ``mirror()``.
    public func observe(_ engine: borrowing Engine) {
        observe(metrics: engine.metrics, gauges: engine.gauges, partition: engine.configuration.partition)
    }

    /// The engine's counts and levels, taken by the pipeline right before it publishes
    /// (so that a scrape made after a client got its receipt counts it) and on the
    /// metrics tick: not after every message, where the copy would cost more than the
    /// message (the counters' dictionaries are copied on the engine's next write).
    public func observe(metrics: Metrics, gauges: Metrics.Gauges, partition: Int = 0) {
        state.withLock {
            $0.latest[partition] = metrics
            $0.gauges[partition] = gauges
        }
    }

    /// A partition this process led went to another process (or its term ended): its
    /// counts stay in the sums, its levels and its own entry go, and a later term of it
    /// here counts from zero again.
    public func forget(partition: Int) {
        state.withLock { state in
            if let last = state.latest.removeValue(forKey: partition) { state.retired = Metrics.summed([state.retired, last]) }
            state.gauges[partition] = nil
            state.mirroredIn[partition] = 0
            state.partitionDepth[partition]?.record(0)
        }
    }

    /// Each partition's latest counts and levels, in partition order.
    public func partitions() -> [Metrics.Partition] {
        state.withLock { state in
            state.latest.keys.sorted().map {
                Metrics.Partition(partition: $0, metrics: state.latest[$0]!, gauges: state.gauges[$0] ?? .init())
            }
        }
    }

    /// Adds to every counter what the engine counted since the last mirror, and sets
    /// the gauges.
    public func mirror() {
        state.withLock { state in
            let now = Metrics.summed(Array(state.latest.values) + [state.retired])
            let was = state.mirrored
            func add(_ counter: Counter, _ now: Int, _ was: Int) {
                if now > was { counter.increment(by: now - was) }
            }
            for (kind, counter) in received { add(counter, now.messagesInByKind[kind] ?? 0, was.messagesInByKind[kind] ?? 0) }
            add(published, now.messagesOut, was.messagesOut)
            for (tally, counter) in events { add(counter, now.receiptsByKind[tally] ?? 0, was.receiptsByKind[tally] ?? 0) }
            for (code, counter) in rejections { add(counter, now.rejectionsByCode[code] ?? 0, was.rejectionsByCode[code] ?? 0) }
            add(queriesRefused, now.queriesRefused, was.queriesRefused)
            add(lateEvents, now.lateEvents, was.lateEvents)
            add(clampedTimestamps, now.clampedTimestamps, was.clampedTimestamps)
            add(idStoreChecks, now.idStoreChecks, was.idStoreChecks)
            add(telemetryAccepted, now.telemetryAccepted, was.telemetryAccepted)
            add(lockExpiries, now.lockExpiries, was.lockExpiries)
            add(publishErrors, now.publishErrors, was.publishErrors)
            add(storeErrors[.query]!, now.errors, was.errors)
            state.mirrored = now

            if state.latest.count > 1 || state.latest.keys.contains(where: { $0 != 0 }) {
                for (partition, metrics) in state.latest {
                    let counter = state.partitionReceived[partition] ?? Counter(
                        label: Name.partitionMessagesReceived, dimensions: [("partition", "\(partition)")], factory: factory)
                    state.partitionReceived[partition] = counter
                    add(counter, metrics.messagesIn, state.mirroredIn[partition] ?? 0)
                    state.mirroredIn[partition] = metrics.messagesIn
                    let depth = state.partitionDepth[partition] ?? Gauge(
                        label: Name.partitionBufferDepth, dimensions: [("partition", "\(partition)")], factory: factory)
                    state.partitionDepth[partition] = depth
                    depth.record(state.gauges[partition]?.bufferDepth ?? 0)
                }
            }
            let g = Metrics.Gauges.summed(state.gauges.values)
            bufferDepth.record(g.bufferDepth)
            republishRemaining.record(g.republishRemaining)
            rooms.record(g.rooms)
            conversations.record(g.conversations)
            workouts.record(g.workouts)
            rememberedIds.record(g.seenIds)
        }
    }

    // MARK: Recorded by the service

    /// A batch committed: how long its transaction took and how many events it held.
    public func committed(after duration: Duration, events: Int) {
        commitSeconds.recordNanoseconds(Self.nanoseconds(duration))
        batchSize.record(events)
    }

    /// A receipt was handed to the MQTT client `milliseconds` after its message arrived.
    public func receiptSent(kind: Receipt.Kind, afterMilliseconds milliseconds: Millis) {
        receiptSeconds[kind]?.recordMilliseconds(max(0, milliseconds))
    }

    public func storeFailed(_ operation: StoreOperation) {
        storeErrors[operation]?.increment()
    }

    /// The broker connection came (a reconnect when it is not the first) or went.
    public func connection(up: Bool, reconnect: Bool = false) {
        connected.record(up ? 1 : 0)
        if reconnect { reconnects.increment() }
    }

    /// This process began to lead under `term` (on SQLite: term 0, once).
    public func leading(term: Int64) {
        termStarted()
        leads(termSum: term)
    }

    /// This process stopped leading: `lost` when its lease was gone (not a shutdown).
    public func stoppedLeading(lost: Bool) {
        leader.record(0)
        if lost { termLost() }
    }

    // With shared partitions each partition's term starts and ends on its own, and the
    // gauges follow what the process leads as a whole.

    /// One more term began here (one partition's, with shared partitions).
    public func termStarted() {
        termsStarted.increment()
    }

    /// This process leads, under `termSum`: the sum of the terms of the partitions it
    /// leads, as its status and `/healthz` say.
    public func leads(termSum: Int64) {
        leaderTerm.record(termSum)
        leader.record(1)
    }

    /// A term ended without a shutdown: its lease ran out or was taken.
    public func termLost() {
        leasesLost.increment()
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
