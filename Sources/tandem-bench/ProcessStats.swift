import Foundation

/// CPU time and memory of another process, from /proc/<pid>/stat and /proc/<pid>/status.
struct ProcessSample {
    var cpuSeconds: Double
    var rssBytes: Int
    var peakRssBytes: Int
    var at: UInt64

    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    static func read(pid: Int32) -> ProcessSample? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        func kB(_ key: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(key) {
                return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0) * 1024
            }
            return 0
        }
        return ProcessSample(cpuSeconds: (utime + stime) / ticksPerSecond, rssBytes: kB("VmRSS:"), peakRssBytes: kB("VmHWM:"), at: monotonicNanos())
    }
}

struct ProcessFigures: Codable {
    var pid: Int32
    /// Percent of one core over the measured window.
    var cpuPercent: Double
    var rssMB: Double
    var peakRssMB: Double

    init?(pid: Int32?, from start: ProcessSample?, to end: ProcessSample?) {
        guard let pid, let start, let end, end.at > start.at else { return nil }
        self.pid = pid
        cpuPercent = (end.cpuSeconds - start.cpuSeconds) / (Double(end.at - start.at) / 1e9) * 100
        rssMB = Double(end.rssBytes) / 1_048_576
        peakRssMB = Double(end.peakRssBytes) / 1_048_576
    }
}
