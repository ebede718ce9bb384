import Histogram
import Synchronization
import TandemCore
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic nanoseconds, comparable across threads.
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Milliseconds since the Unix epoch, for payload timestamps.
func wallMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// What a run measured, before it is turned into a report.
struct Tally {
    var sent = 0
    var answered = 0
    var accepted = 0
    var rejected = 0
    var duplicates = 0
    var rejectionCodes: [String: Int] = [:]
    var receiptLatency = Histogram<UInt64>(highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: .three)
    var snapshotLatency = Histogram<UInt64>(highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: .three)
    var snapshots = 0
    var snapshotBytes = 0
    /// Every message the bench's clients received from the broker (topic and payload).
    var deliveredBytes = 0
    var firstSentAt: UInt64 = 0
    var lastAnswerAt: UInt64 = 0
}

/// Every event the bench sends and every receipt and snapshot it hears, shared by the
/// driver and the clients' receiving tasks (so behind one `Mutex`).
///
/// Event-to-receipt latency is recorded when the receipt arrives. Event-to-snapshot
/// latency is worked out at the end: an accepted event whose receipt said version N on
/// target T was visible from the first snapshot of T with a version of N or more.
final class Tracker: Sendable {
    struct Pending {
        var sentAt: UInt64
        var target: Int32
        /// For events that get no receipt (telemetry): the version they will make.
        var expectedVersion: Int64
    }

    struct Visible {
        var target: Int32
        var version: Int64
        var sentAt: UInt64
    }

    struct State {
        var pending: [String: Pending] = [:]
        var tally = Tally()
        var targets: [String: Int32] = [:]
        /// Per target: (version, arrival) of each snapshot, in arrival order.
        var snapshots: [[(version: Int64, at: UInt64)]] = []
        var visible: [Visible] = []
        var measuring = true
        /// Receipt latencies since the last ``takeInterval()`` (soak samples).
        var interval = Histogram<UInt64>(highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: .two)
    }

    let state = Mutex(State())

    func target(_ key: String) -> Int32 {
        state.withLock { s in
            if let t = s.targets[key] { return t }
            let t = Int32(s.snapshots.count)
            s.targets[key] = t
            s.snapshots.append([])
            return t
        }
    }

    /// Records a send; `expectedVersion` > 0 for events that get no receipt.
    func sent(id: String, target: Int32, at: UInt64, expectedVersion: Int64 = 0) {
        state.withLock { s in
            s.pending[id] = Pending(sentAt: at, target: target, expectedVersion: expectedVersion)
            if s.tally.sent == 0 { s.tally.firstSentAt = at }
            s.tally.sent += 1
            if expectedVersion > 0 {
                s.visible.append(Visible(target: target, version: expectedVersion, sentAt: at))
            }
        }
    }

    /// A receipt (or, for the relay, the relayed message) for `id`.
    func answered(id: String, status: String, code: String?, version: Int64?, at: UInt64) {
        state.withLock { s in
            guard let p = s.pending.removeValue(forKey: id) else { return }
            s.tally.answered += 1
            s.tally.lastAnswerAt = max(s.tally.lastAnswerAt, at)
            _ = s.tally.receiptLatency.record((at &- p.sentAt) / 1000)
            _ = s.interval.record((at &- p.sentAt) / 1000)
            switch status {
            case "accepted":
                s.tally.accepted += 1
                if let version { s.visible.append(Visible(target: p.target, version: version, sentAt: p.sentAt)) }
            case "duplicate": s.tally.duplicates += 1
            default:
                s.tally.rejected += 1
                s.tally.rejectionCodes[code ?? "?", default: 0] += 1
            }
        }
    }

    func delivered(bytes: Int) {
        state.withLock { $0.tally.deliveredBytes += bytes }
    }

    func snapshot(target key: String, version: Int64, bytes: Int, at: UInt64) {
        state.withLock { s in
            guard let t = s.targets[key] else { return }
            s.snapshots[Int(t)].append((version, at))
            s.tally.snapshots += 1
            s.tally.snapshotBytes += bytes
        }
    }

    /// Outstanding events that expect a receipt.
    var unanswered: Int { state.withLock { s in s.pending.values.count(where: { $0.expectedVersion == 0 }) } }

    var progress: (sent: Int, answered: Int, p99: UInt64) {
        state.withLock { ($0.tally.sent, $0.tally.answered, $0.tally.receiptLatency.valueAtPercentile(99)) }
    }

    /// Totals so far, and the receipt latency since the last call (microseconds; 0 when
    /// no receipt came); `unanswered` counts every event sent and not yet answered.
    func takeInterval() -> (sent: Int, answered: Int, unanswered: Int, p99: UInt64, max: UInt64, receipts: Int) {
        state.withLock { s in
            let interval = s.interval
            s.interval.reset()
            let unanswered = s.pending.values.count(where: { $0.expectedVersion == 0 })
            let p99 = interval.totalCount > 0 ? interval.valueAtPercentile(99) : 0
            return (s.tally.sent, s.tally.answered, unanswered, p99, interval.totalCount > 0 ? interval.max : 0, Int(interval.totalCount))
        }
    }

    /// The refusals since the last ``reset()``, by code.
    var rejectionCodes: [String: Int] { state.withLock { $0.tally.rejectionCodes } }

    /// Clears the counters (after setup) but keeps the targets.
    func reset() {
        state.withLock { s in
            s.pending = [:]
            s.tally = Tally()
            s.visible = []
            s.interval.reset()
            for i in s.snapshots.indices { s.snapshots[i].removeAll(keepingCapacity: true) }
        }
    }

    /// The final tally with event-to-snapshot latencies filled in.
    func finish() -> Tally {
        state.withLock { s in
            var tally = s.tally
            for v in s.visible {
                let list = s.snapshots[Int(v.target)]
                // First snapshot at or after the event's version, in arrival order.
                var lo = 0, hi = list.count
                while lo < hi {
                    let mid = (lo + hi) / 2
                    if list[mid].version < v.version { lo = mid + 1 } else { hi = mid }
                }
                if lo < list.count, list[lo].at >= v.sentAt {
                    _ = tally.snapshotLatency.record((list[lo].at - v.sentAt) / 1000)
                }
            }
            return tally
        }
    }
}

/// Cheap readers for what the bench hears, so that its own CPU stays small.
enum WireScan {
    /// The first `"version":N` in a snapshot (it comes before any nested object).
    static func version(in payload: [UInt8]) -> Int64? {
        let key = Array("\"version\":".utf8)
        guard payload.count > key.count else { return nil }
        var i = 0
        let end = payload.count - key.count
        while i < end {
            if payload[i] == key[0], payload[i + 1] == key[1] {
                var match = true
                for j in 2..<key.count where payload[i + j] != key[j] { match = false; break }
                if match {
                    var k = i + key.count
                    var n: Int64 = 0
                    var any = false
                    while k < payload.count, payload[k] >= 48, payload[k] <= 57 {
                        n = n * 10 + Int64(payload[k] - 48)
                        k += 1
                        any = true
                    }
                    return any ? n : nil
                }
            }
            i += 1
        }
        return nil
    }

    /// id, status, code and version of a receipt.
    static func receipt(_ payload: [UInt8]) -> (id: String, status: String, code: String?, version: Int64?)? {
        guard let json = try? JSON.parse(payload), let id = json["id"]?.stringValue, let status = json["status"]?.stringValue else { return nil }
        return (id, status, json["code"]?.stringValue, json["version"]?.int64Value)
    }
}
