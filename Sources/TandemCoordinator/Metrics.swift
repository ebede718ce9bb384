import TandemCore

/// Counters and latency figures, published retained on `coordinator/metrics`.
public struct Metrics: Sendable {
    public var messagesIn = 0
    public var messagesOut = 0
    public var accepted = 0
    public var rejected = 0
    public var duplicates = 0
    /// Rejections by code (`invalid_payload`, `owned_by_other`, ...): they add up to `rejected`.
    public var rejectionsByCode: [ReceiptCode: Int] = [:]
    /// Queries (DM history, logbook) refused with an error response (unreadable, rate limit).
    public var queriesRefused = 0
    /// Messages dropped without an answer: invalid `{userId}` level, unknown topic.
    public var dropped = 0
    /// Events that sorted before events already applied (applied anyway, state not rewound).
    public var lateEvents = 0
    public var clampedTimestamps = 0
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

    mutating func count(_ receipt: Receipt) {
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

    func json(uptimeSeconds: Double, bufferDepth: Int, rooms: Int, conversations: Int, workouts: Int, seenIds: Int) -> JSON {
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
            "telemetryAccepted": .int(Int64(telemetryAccepted)),
            "lockExpiries": .int(Int64(lockExpiries)),
            "batches": .int(Int64(batches)),
            "lastBatchSize": .int(Int64(lastBatchSize)),
            "commitMsAvg": .double(batches > 0 ? ((commitMillisTotal / Double(batches)) * 1000).rounded() / 1000 : 0),
            "commitMsMax": .double((commitMillisMax * 1000).rounded() / 1000),
            "publishErrors": .int(Int64(publishErrors)),
            "errors": .int(Int64(errors)),
            "bufferDepth": .int(Int64(bufferDepth)),
            "rooms": .int(Int64(rooms)),
            "conversations": .int(Int64(conversations)),
            "workouts": .int(Int64(workouts)),
            "seenIds": .int(Int64(seenIds)),
        ])
    }
}
