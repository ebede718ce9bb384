import TandemCore

/// Counters and latency figures, published retained on `coordinator/metrics`, and
/// mirrored into swift-metrics by ``MetricsExporter`` (the engine itself imports no
/// metrics library: it only counts).
public struct Metrics: Sendable {
    public var messagesIn = 0
    /// The messages in by what their topic says they are; they add up to `messagesIn`.
    public var messagesInByKind: [InboundKind: Int] = [:]
    public var messagesOut = 0
    public var accepted = 0
    public var rejected = 0
    public var duplicates = 0
    /// Every receipt by kind and status: they add up to `accepted + rejected + duplicates`.
    public var receiptsByKind: [ReceiptTally: Int] = [:]
    /// Rejections by code (`invalid_payload`, `owned_by_other`, ...): they add up to `rejected`.
    public var rejectionsByCode: [ReceiptCode: Int] = [:]
    /// Queries (DM history, logbook) refused with an error response (unreadable, rate limit).
    public var queriesRefused = 0
    /// Messages dropped without an answer: invalid `{userId}` level, unknown topic.
    public var dropped = 0
    /// With several partitions: messages this partition's session received for another
    /// one and left alone (each partition's session takes every inbound message). Not in
    /// `messagesIn`, which counts each message once over all partitions.
    public var messagesElsewhere = 0
    /// Events that sorted before events already applied (applied anyway, state not rewound).
    public var lateEvents = 0
    public var clampedTimestamps = 0
    /// Resends (or new ids with an old timestamp) that only the store could judge, asked
    /// off the pipeline (``Engine/IdCheck``): the cost of keeping minutes of ids in memory.
    public var idStoreChecks = 0
    public var telemetryAccepted = 0
    public var lockExpiries = 0
    public var batches = 0
    public var lastBatchSize = 0
    public var commitMillisTotal = 0.0
    public var commitMillisMax = 0.0
    public var publishErrors = 0
    /// Failures the coordinator survived (a query whose store read failed). A failed
    /// commit is not counted: it stops the coordinator.
    public var errors = 0

    public init() {}

    /// What an inbound message is, by its topic (an invalid topic that still names its
    /// kind counts as that kind; one that names nothing is `dropped`).
    public enum InboundKind: String, CaseIterable, Sendable {
        case room, dm, workout, flight, health, presence, query, dropped
    }

    public struct ReceiptTally: Hashable, Sendable {
        public var kind: Receipt.Kind
        public var status: Receipt.Status

        public init(_ kind: Receipt.Kind, _ status: Receipt.Status) {
            self.kind = kind
            self.status = status
        }
    }

    mutating func count(_ receipt: Receipt) {
        receiptsByKind[ReceiptTally(receipt.kind, receipt.status), default: 0] += 1
        switch receipt.status {
        case .accepted: accepted += 1
        case .rejected:
            rejected += 1
            if let code = receipt.code { rejectionsByCode[code, default: 0] += 1 }
        case .duplicate: duplicates += 1
        }
    }

    /// `{"invalid_payload":3,"not_found":1}`: the rejections by code.
    var rejectionsJSON: JSON {
        let members: [JSON.Member] = rejectionsByCode
            .sorted { $0.key.rawValue < $1.key.rawValue }
            .map { JSON.Member($0.key.rawValue, JSON.int(Int64($0.value))) }
        return .object(members)
    }

    func json(uptimeSeconds: Double, gauges g: Gauges) -> JSON {
        .obj([
            "uptimeSeconds": .double((uptimeSeconds * 10).rounded() / 10),
            "messagesIn": .int(Int64(messagesIn)),
            "messagesOut": .int(Int64(messagesOut)),
            "receipts": .obj([
                "accepted": .int(Int64(accepted)),
                "rejected": .int(Int64(rejected)),
                "duplicate": .int(Int64(duplicates)),
            ]),
            "rejections": rejectionsJSON,
            "queriesRefused": .int(Int64(queriesRefused)),
            "dropped": .int(Int64(dropped)),
            "lateEvents": .int(Int64(lateEvents)),
            "clampedTimestamps": .int(Int64(clampedTimestamps)),
            "idStoreChecks": .int(Int64(idStoreChecks)),
            "telemetryAccepted": .int(Int64(telemetryAccepted)),
            "lockExpiries": .int(Int64(lockExpiries)),
            "batches": .int(Int64(batches)),
            "lastBatchSize": .int(Int64(lastBatchSize)),
            "commitMsAvg": .double(batches > 0 ? ((commitMillisTotal / Double(batches)) * 1000).rounded() / 1000 : 0),
            "commitMsMax": .double((commitMillisMax * 1000).rounded() / 1000),
            "publishErrors": .int(Int64(publishErrors)),
            "errors": .int(Int64(errors)),
            "bufferDepth": .int(Int64(g.bufferDepth)),
            "republishRemaining": .int(Int64(g.republishRemaining)),
            "rooms": .int(Int64(g.rooms)),
            "conversations": .int(Int64(g.conversations)),
            "workouts": .int(Int64(g.workouts)),
            "seenIds": .int(Int64(g.seenIds)),
        ])
    }

    /// Several partitions' counts as one: every count added up; the last batch's size and
    /// the slowest commit are the largest of any partition's.
    public static func summed(_ parts: some Sequence<Metrics>) -> Metrics {
        var sum = Metrics()
        for m in parts {
            sum.messagesIn += m.messagesIn
            sum.messagesInByKind.merge(m.messagesInByKind, uniquingKeysWith: +)
            sum.messagesOut += m.messagesOut
            sum.accepted += m.accepted
            sum.rejected += m.rejected
            sum.duplicates += m.duplicates
            sum.receiptsByKind.merge(m.receiptsByKind, uniquingKeysWith: +)
            sum.rejectionsByCode.merge(m.rejectionsByCode, uniquingKeysWith: +)
            sum.queriesRefused += m.queriesRefused
            sum.dropped += m.dropped
            sum.messagesElsewhere += m.messagesElsewhere
            sum.lateEvents += m.lateEvents
            sum.clampedTimestamps += m.clampedTimestamps
            sum.idStoreChecks += m.idStoreChecks
            sum.telemetryAccepted += m.telemetryAccepted
            sum.lockExpiries += m.lockExpiries
            sum.batches += m.batches
            sum.lastBatchSize = max(sum.lastBatchSize, m.lastBatchSize)
            sum.commitMillisTotal += m.commitMillisTotal
            sum.commitMillisMax = max(sum.commitMillisMax, m.commitMillisMax)
            sum.publishErrors += m.publishErrors
            sum.errors += m.errors
        }
        return sum
    }

    /// One partition's counts and levels, as `coordinator/metrics` lists them.
    public struct Partition: Sendable {
        public var partition: Int
        public var metrics: Metrics
        public var gauges: Gauges

        public init(partition: Int, metrics: Metrics, gauges: Gauges) {
            self.partition = partition
            self.metrics = metrics
            self.gauges = gauges
        }
    }

    /// `coordinator/metrics` for the partitions one process leads: their sums as with one
    /// partition, and with more than one, `"partitions"` listing each one's own figures.
    public static func publication(topics: Topics, partitions: [Partition], uptimeSeconds: Double) -> Publication {
        var json = summed(partitions.map(\.metrics)).json(uptimeSeconds: uptimeSeconds, gauges: .summed(partitions.map(\.gauges)))
        if partitions.count > 1, case .object(var members) = json {
            members.append(JSON.Member("partitions", .array(partitions.map { p in
                .obj([
                    "partition": .int(Int64(p.partition)),
                    "messagesIn": .int(Int64(p.metrics.messagesIn)),
                    "messagesElsewhere": .int(Int64(p.metrics.messagesElsewhere)),
                    "messagesOut": .int(Int64(p.metrics.messagesOut)),
                    "batches": .int(Int64(p.metrics.batches)),
                    "bufferDepth": .int(Int64(p.gauges.bufferDepth)),
                    "rooms": .int(Int64(p.gauges.rooms)),
                    "conversations": .int(Int64(p.gauges.conversations)),
                    "workouts": .int(Int64(p.gauges.workouts)),
                ])
            })))
            json = .object(members)
        }
        return Publication(topic: topics.coordinatorMetrics, payload: json.serialized(), retain: true, qos: 0)
    }

    /// What the engine holds right now (levels, not counts).
    public struct Gauges: Sendable, Equatable {
        /// Several partitions' levels added up.
        public static func summed(_ parts: some Sequence<Gauges>) -> Gauges {
            var sum = Gauges()
            for g in parts {
                sum.bufferDepth += g.bufferDepth
                sum.republishRemaining += g.republishRemaining
                sum.rooms += g.rooms
                sum.conversations += g.conversations
                sum.workouts += g.workouts
                sum.seenIds += g.seenIds
            }
            return sum
        }

        /// Events and commands waiting in the reorder buffer.
        public var bufferDepth = 0
        /// Rooms, conversations and workouts whose snapshots are still to be republished
        /// after the start (0 once done).
        public var republishRemaining = 0
        public var rooms = 0
        public var conversations = 0
        public var workouts = 0
        /// Ids remembered for duplicate detection.
        public var seenIds = 0

        public init() {}
    }
}

extension Topics.Inbound {
    /// How the metrics count a message on this topic.
    var metricsKind: Metrics.InboundKind {
        switch self {
        case .roomEvent: .room
        case .dmCommand: .dm
        case .workoutControl: .workout
        case .flight: .flight
        case .health: .health
        case .request: .query
        case .presence: .presence
        case .invalid(_, let kind, _, _, _):
            switch kind {
            case .room: .room
            case .dm: .dm
            case .workout: .workout
            }
        }
    }
}
