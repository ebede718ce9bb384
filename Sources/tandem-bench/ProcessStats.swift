import Foundation

/// CPU time and memory of another process, from /proc/<pid>/stat and /proc/<pid>/status;
/// its thread switches (voluntary and not, every thread's, /proc/<pid>/task/*/status) and
/// its read and write system calls (/proc/<pid>/io).
struct ProcessSample {
    var cpuSeconds: Double
    var rssBytes: Int
    var peakRssBytes: Int
    var at: UInt64
    var switches = 0
    var threads = 0
    var readCalls = 0
    var writeCalls = 0

    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    static func read(pid: Int32) -> ProcessSample? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        var sample = ProcessSample(
            cpuSeconds: (utime + stime) / ticksPerSecond, rssBytes: field(status, "VmRSS:") * 1024,
            peakRssBytes: field(status, "VmHWM:") * 1024, at: monotonicNanos())
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        sample.threads = tasks.count
        for task in tasks {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { continue }
            sample.switches += field(text, "voluntary_ctxt_switches:") + field(text, "nonvoluntary_ctxt_switches:")
        }
        if let io = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) {
            sample.readCalls = field(io, "syscr:")
            sample.writeCalls = field(io, "syscw:")
        }
        return sample
    }

    /// The number after `key` at the start of a line ("VmRSS:\t  1234 kB": 1234).
    private static func field(_ text: String, _ key: String) -> Int {
        for line in text.split(separator: "\n") where line.hasPrefix(key) {
            return line.dropFirst(key.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) } ?? 0
        }
        return 0
    }
}

struct ProcessFigures: Codable {
    var pid: Int32
    /// Percent of one core over the measured window.
    var cpuPercent: Double
    var rssMB: Double
    var peakRssMB: Double
    /// Per event of the run (each message sent by the bench): CPU time in microseconds,
    /// thread switches, read and write system calls.
    var cpuMicrosPerEvent: Double
    var switchesPerEvent: Double
    var readCallsPerEvent: Double
    var writeCallsPerEvent: Double
    /// Threads at the end of the run.
    var threads: Int

    init?(pid: Int32?, from start: ProcessSample?, to end: ProcessSample?, events: Int) {
        guard let pid, let start, let end, end.at > start.at else { return nil }
        self.pid = pid
        cpuPercent = (end.cpuSeconds - start.cpuSeconds) / (Double(end.at - start.at) / 1e9) * 100
        rssMB = Double(end.rssBytes) / 1_048_576
        peakRssMB = Double(end.peakRssBytes) / 1_048_576
        let n = Double(max(events, 1))
        cpuMicrosPerEvent = (end.cpuSeconds - start.cpuSeconds) * 1e6 / n
        switchesPerEvent = Double(end.switches - start.switches) / n
        readCallsPerEvent = Double(end.readCalls - start.readCalls) / n
        writeCallsPerEvent = Double(end.writeCalls - start.writeCalls) / n
        threads = end.threads
    }

    /// "385 µs CPU, 6.20 switches, 3.1 reads + 4.0 writes per event; 10 threads"
    var costLine: String {
        String(format: "%.0f µs CPU, %.2f switches, %.1f reads + %.1f writes per event; %d threads",
               cpuMicrosPerEvent, switchesPerEvent, readCallsPerEvent, writeCallsPerEvent, threads)
    }
}
