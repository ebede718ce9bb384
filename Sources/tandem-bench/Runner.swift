import Foundation
/// Drives a scenario: unmeasured setup, then open-loop load at a fixed offered rate
/// (one driver task, woken every millisecond, sending whatever is due, so the offered
/// rate holds whatever the answers do), then a drain that waits for every receipt.
struct Runner {
    var durationSeconds: Double
    var drainTimeoutSeconds: Double
    var setupRate: Double
    var p99LimitMicros: UInt64
    var coordinatorPid: Int32?
    var brokerPid: Int32?
    var showProgress: Bool

    /// Sends unmeasured messages (setup, teardown) at `setupRate` and waits for their
    /// receipts. Returns the refusals whose code is not in ``setupCodesTolerated``.
    @discardableResult
    func unmeasured(_ batches: [[Outgoing]], scenario: any Scenario, tracker: Tracker, label: String) async -> [String: Int] {
        var refused: [String: Int] = [:]
        for (n, batch) in batches.enumerated() where !batch.isEmpty {
            tracker.reset()
            let start = monotonicNanos()
            for (i, o) in batch.enumerated() {
                tracker.sent(id: o.id, target: o.target, at: monotonicNanos())
                scenario.clients[o.client].send(o.topic, o.payload)
                let due = UInt64(Double(i + 1) / setupRate * 1e9)
                let elapsed = monotonicNanos() - start
                if due > elapsed + 2_000_000 { try? await Task.sleep(for: .nanoseconds(Int(due - elapsed))) }
            }
            let waitStart = monotonicNanos()
            while tracker.unanswered > 0, monotonicNanos() - waitStart < UInt64(max(drainTimeoutSeconds, 60) * 1e9) {
                if showProgress {
                    let p = tracker.progress
                    FileHandleOutput.progress("[\(scenario.name) \(label) \(n + 1)/\(batches.count)] sent \(p.sent), answered \(p.answered)")
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
            if tracker.unanswered > 0 {
                FileHandleOutput.warn("\(scenario.name) \(label): \(tracker.unanswered) messages without a receipt")
            }
            for (code, count) in tracker.rejectionCodes where !setupCodesTolerated.contains(code) {
                refused[code, default: 0] += count
            }
        }
        if showProgress { FileHandleOutput.endProgress() }
        tracker.reset()
        return refused
    }

    /// One measured run at `rate` events/s.
    /// `sampler`: soak samples taken along the run (``Sampler``).
    func run(_ scenario: any Scenario, tracker: Tracker, rate: Double, seq: inout Int, sampler: Sampler? = nil) async -> RunReport {
        tracker.reset()
        let coordinatorStart = coordinatorPid.flatMap(ProcessSample.read)
        let brokerStart = brokerPid.flatMap(ProcessSample.read)
        // The generator's own share: a baseline must not be bound by it.
        let benchStart = ProcessSample.read(pid: getpid())
        let start = monotonicNanos()
        sampler?.begin(tracker: tracker)
        let duration = UInt64(durationSeconds * 1e9)
        var sent = 0
        var lastProgress = start
        while true {
            let now = monotonicNanos()
            if now - start >= duration { break }
            let due = Int(Double(now - start) / 1e9 * rate) + 1
            while sent < due {
                let o = scenario.next(seq)
                seq += 1
                sent += 1
                tracker.sent(id: o.id, target: o.target, at: monotonicNanos(), expectedVersion: o.expectedVersion)
                scenario.clients[o.client].send(o.topic, o.payload)
            }
            sampler?.tick(tracker: tracker, rate: rate, now: now)
            if showProgress, now - lastProgress > 500_000_000 {
                lastProgress = now
                progress(scenario, tracker, rate: rate, elapsed: Double(now - start) / 1e9)
            }
            try? await Task.sleep(for: .milliseconds(1))
        }
        let sendEnd = monotonicNanos()
        while tracker.unanswered > 0, monotonicNanos() - sendEnd < UInt64(drainTimeoutSeconds * 1e9) {
            sampler?.tick(tracker: tracker, rate: 0, now: monotonicNanos())
            if showProgress { progress(scenario, tracker, rate: rate, elapsed: Double(monotonicNanos() - start) / 1e9, draining: true) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        // Telemetry snapshots are throttled to one a second: give the last one time to come.
        if scenario.fixedRate != nil { try? await Task.sleep(for: .milliseconds(1500)) }
        let end = monotonicNanos()
        if showProgress { FileHandleOutput.endProgress() }
        let coordinatorEnd = coordinatorPid.flatMap(ProcessSample.read)
        let brokerEnd = brokerPid.flatMap(ProcessSample.read)
        let benchEnd = ProcessSample.read(pid: getpid())
        let unanswered = tracker.unanswered
        let tally = tracker.finish()

        let sendSeconds = Double(sendEnd - start) / 1e9
        let window = Double(max(tally.lastAnswerAt, sendEnd) - start) / 1e9
        let achieved = scenario.fixedRate != nil
            ? Double(tally.sent - tally.rejected) / sendSeconds
            : Double(tally.answered) / max(window, 1e-9)
        let receipt = Percentiles(tally.receiptLatency)
        var report = RunReport(
            scenario: scenario.name, shape: scenario.shape, offeredPerSecond: rate,
            sentPerSecond: Double(tally.sent) / sendSeconds, achievedPerSecond: achieved, durationSeconds: sendSeconds,
            sent: tally.sent, answered: tally.answered, unanswered: unanswered, accepted: tally.accepted,
            rejected: tally.rejected, rejectionCodes: tally.rejectionCodes, duplicates: tally.duplicates,
            receiptLatencyMicros: receipt, snapshotLatencyMicros: Percentiles(tally.snapshotLatency),
            snapshotsPerSecond: Double(tally.snapshots) / (Double(end - start) / 1e9),
            snapshotBytesPerSecond: Double(tally.snapshotBytes) / (Double(end - start) / 1e9),
            deliveredBytesPerEvent: tally.sent > 0 ? Double(tally.deliveredBytes) / Double(tally.sent) : 0,
            coordinator: ProcessFigures(pid: coordinatorPid, from: coordinatorStart, to: coordinatorEnd, events: tally.sent),
            broker: ProcessFigures(pid: brokerPid, from: brokerStart, to: brokerEnd, events: tally.sent),
            bench: ProcessFigures(pid: getpid(), from: benchStart, to: benchEnd, events: tally.sent),
            sustainable: false)
        report.sustainable = unanswered == 0 && achieved >= 0.95 * rate
            && (scenario.fixedRate != nil ? tally.rejected == 0 : receipt.p99 <= p99LimitMicros)
        return report
    }

    func progress(_ scenario: any Scenario, _ tracker: Tracker, rate: Double, elapsed: Double, draining: Bool = false) {
        let p = tracker.progress
        FileHandleOutput.progress(
            "[\(scenario.name)] \(draining ? "draining " : "")\(Int(elapsed))s offered \(Int(rate))/s sent \(p.sent) answered \(p.answered) outstanding \(p.sent - p.answered) p99 \(Double(p.p99 / 10) / 100) ms")
    }
}
