import Foundation
import Histogram

/// Latency percentiles in microseconds.
struct Percentiles: Codable {
    var count: UInt64
    var p50: UInt64
    var p90: UInt64
    var p99: UInt64
    var p999: UInt64
    var max: UInt64
    var mean: Double

    init(_ h: Histogram<UInt64>) {
        count = h.totalCount
        p50 = h.valueAtPercentile(50)
        p90 = h.valueAtPercentile(90)
        p99 = h.valueAtPercentile(99)
        p999 = h.valueAtPercentile(99.9)
        max = h.max
        mean = count == 0 ? 0 : h.mean
    }
}

/// One measured run of one scenario at one offered rate.
struct RunReport: Codable {
    var scenario: String
    var shape: [String: Int]
    var offeredPerSecond: Double
    var sentPerSecond: Double
    var achievedPerSecond: Double
    var durationSeconds: Double
    var sent: Int
    var answered: Int
    var unanswered: Int
    var accepted: Int
    var rejected: Int
    var rejectionCodes: [String: Int]
    var duplicates: Int
    /// Event to receipt (relay: to the relayed copy), microseconds.
    var receiptLatencyMicros: Percentiles
    /// Event to the first snapshot showing it, microseconds.
    var snapshotLatencyMicros: Percentiles
    var snapshotsPerSecond: Double
    var snapshotBytesPerSecond: Double
    /// Bytes the broker delivered to the bench's clients (receipts, snapshots, changes;
    /// topic and payload) per event sent.
    var deliveredBytesPerEvent: Double
    var coordinator: ProcessFigures?
    var broker: ProcessFigures?
    /// tandem-bench itself (the load generator and every client).
    var bench: ProcessFigures?
    var sustainable: Bool
}

/// What one invocation prints.
struct BenchReport: Codable {
    var machine: Machine
    var runs: [RunReport]
    /// With `--find-max`: the highest sustainable run of each scenario, and every step.
    var findMax: [String: FindMaxResult]?
    /// Tandem scenario figure over the relay's, from the same invocation.
    var ratios: [String: Ratio]

    struct Machine: Codable {
        var nproc: Int
        var cpuModel: String
        var loadAverage: String
    }

    struct FindMaxResult: Codable {
        var highestSustainablePerSecond: Double?
        var steps: [RunReport]
    }

    struct Ratio: Codable {
        var achievedRateOverRelay: Double
        var receiptP50OverRelayMicros: Int64
        var receiptP99OverRelayMicros: Int64
    }

    static func machine() -> Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { String($0.split(separator: ":", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespaces) } ?? "unknown"
        let load = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ").prefix(3).joined(separator: " ")
        return Machine(nproc: ProcessInfo.processInfo.activeProcessorCount, cpuModel: model, loadAverage: load)
    }

    func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    func table() -> String {
        var out = "machine: \(machine.nproc) cores, \(machine.cpuModel), load \(machine.loadAverage)\n\n"
        let header = ["scenario", "offered/s", "achieved/s", "unanswered", "accepted", "rejected",
                      "rcpt p50", "p90", "p99", "p99.9", "max", "snap p50", "p99", "snap/s", "snap KB/s", "B/event", "coord CPU%", "RSS MB"]
        var rows: [[String]] = [header]
        func ms(_ us: UInt64) -> String { String(format: "%.2f", Double(us) / 1000) }
        for r in runs {
            rows.append([
                r.scenario + (r.sustainable ? "" : " (!)"), String(format: "%.0f", r.offeredPerSecond), String(format: "%.0f", r.achievedPerSecond),
                String(r.unanswered), String(r.accepted), String(r.rejected),
                ms(r.receiptLatencyMicros.p50), ms(r.receiptLatencyMicros.p90), ms(r.receiptLatencyMicros.p99),
                ms(r.receiptLatencyMicros.p999), ms(r.receiptLatencyMicros.max),
                r.snapshotLatencyMicros.count > 0 ? ms(r.snapshotLatencyMicros.p50) : "-",
                r.snapshotLatencyMicros.count > 0 ? ms(r.snapshotLatencyMicros.p99) : "-",
                String(format: "%.0f", r.snapshotsPerSecond), String(format: "%.0f", r.snapshotBytesPerSecond / 1024),
                String(format: "%.0f", r.deliveredBytesPerEvent),
                r.coordinator.map { String(format: "%.0f", $0.cpuPercent) } ?? "-",
                r.coordinator.map { String(format: "%.1f", $0.rssMB) } ?? "-",
            ])
        }
        let widths = header.indices.map { i in rows.map { $0[i].count }.max() ?? 0 }
        for (n, row) in rows.enumerated() {
            out += row.enumerated().map { i, cell in
                i == 0 ? cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                       : String(repeating: " ", count: widths[i] - cell.count) + cell
            }.joined(separator: "  ") + "\n"
            if n == 0 { out += "(latencies in ms; (!) = not sustainable: unanswered events, achieved < 95% of offered, or p99 over the limit)\n" }
        }
        for r in runs where !r.rejectionCodes.isEmpty {
            out += "\(r.scenario) rejections: " + r.rejectionCodes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
        }
        for r in runs {
            if let b = r.broker { out += "\(r.scenario): broker CPU \(String(format: "%.0f", b.cpuPercent))%, RSS \(String(format: "%.1f", b.rssMB)) MB" + (r.bench.map { ", tandem-bench CPU \(String(format: "%.0f", $0.cpuPercent))%" } ?? "") + "\n" }
        }
        // What each event cost each process (with the relay: each message relayed).
        for r in runs {
            if let c = r.coordinator, r.scenario != "relay" { out += "\(r.scenario) cost, coordinator: \(c.costLine)\n" }
            if let b = r.broker { out += "\(r.scenario) cost, broker: \(b.costLine)\n" }
            if let c = r.coordinator, let b = r.broker, r.scenario != "relay", b.cpuMicrosPerEvent > 0 {
                out += "\(r.scenario) cost, coordinator over broker: CPU x\(String(format: "%.2f", c.cpuMicrosPerEvent / b.cpuMicrosPerEvent))\n"
            }
        }
        for (name, ratio) in ratios.sorted(by: { $0.key < $1.key }) {
            out += "\(name) vs relay: achieved rate x\(String(format: "%.2f", ratio.achievedRateOverRelay)), receipt p50 +\(ms(UInt64(max(0, ratio.receiptP50OverRelayMicros)))) ms, p99 +\(ms(UInt64(max(0, ratio.receiptP99OverRelayMicros)))) ms over the relay's\n"
        }
        if let findMax {
            for (name, result) in findMax.sorted(by: { $0.key < $1.key }) {
                out += "find-max \(name): highest sustainable offered rate " + (result.highestSustainablePerSecond.map { String(format: "%.0f/s", $0) } ?? "none") + " (steps: " + result.steps.map { String(Int($0.offeredPerSecond)) + ($0.sustainable ? "" : "!") }.joined(separator: " ") + ")\n"
            }
        }
        return out
    }
}
