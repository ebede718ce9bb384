import Foundation

/// Soak samples (`--samples FILE`): every `--sample-seconds` of a measured run, one
/// tab-separated line of what the run did since the last one (receipt p99 and max,
/// events sent, answered, still unanswered) and what the system holds (the
/// coordinator's RSS and CPU, the size of each `--watch` file or directory), so that
/// a long run shows whether anything grows.
final class Sampler {
    struct Watch {
        var name: String
        var path: String
    }

    let intervalNanos: UInt64
    let watches: [Watch]
    let coordinatorPid: Int32?
    private let handle: FileHandle
    private var lastAt: UInt64 = 0
    private var lastCPU: ProcessSample?
    private var lastSent = 0
    private var lastAnswered = 0
    private var start: UInt64 = 0

    /// `watch`: NAME=PATH, as given on the command line.
    init(path: String, intervalSeconds: Double, watch: [String], coordinatorPid: Int32?) throws {
        intervalNanos = UInt64(intervalSeconds * 1e9)
        watches = watch.map { text in
            let parts = text.split(separator: "=", maxSplits: 1)
            return Watch(name: String(parts[0]), path: String(parts[1]))
        }
        self.coordinatorPid = coordinatorPid
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
        self.handle = handle
        let columns = ["seconds", "offered_per_s", "sent_per_s", "answered_per_s", "unanswered", "p99_ms", "max_ms",
                       "rss_mb", "cpu_pct"] + watches.map { "\($0.name)_mb" }
        write(columns.joined(separator: "\t"))
    }

    /// The measured run starts: samples count from here.
    func begin(tracker: Tracker) {
        start = monotonicNanos()
        lastAt = start
        lastCPU = coordinatorPid.flatMap(ProcessSample.read)
        _ = tracker.takeInterval()
        lastSent = 0
        lastAnswered = 0
    }

    /// Writes a sample when one is due.
    func tick(tracker: Tracker, rate: Double, now: UInt64) {
        guard now - lastAt >= intervalNanos else { return }
        let seconds = Double(now - lastAt) / 1e9
        let t = tracker.takeInterval()
        let process = coordinatorPid.flatMap(ProcessSample.read)
        var cpu = Double.nan
        if let process, let lastCPU, process.at > lastCPU.at {
            cpu = (process.cpuSeconds - lastCPU.cpuSeconds) / (Double(process.at - lastCPU.at) / 1e9) * 100
        }
        var fields = [
            String(format: "%.0f", Double(now - start) / 1e9),
            String(format: "%.0f", rate),
            String(format: "%.0f", Double(t.sent - lastSent) / seconds),
            String(format: "%.0f", Double(t.answered - lastAnswered) / seconds),
            "\(t.unanswered)",
            String(format: "%.2f", Double(t.p99) / 1000),
            String(format: "%.2f", Double(t.max) / 1000),
            process.map { String(format: "%.1f", Double($0.rssBytes) / 1_048_576) } ?? "",
            cpu.isNaN ? "" : String(format: "%.0f", cpu),
        ]
        for watch in watches { fields.append(String(format: "%.1f", Double(Self.bytes(at: watch.path)) / 1_048_576)) }
        write(fields.joined(separator: "\t"))
        lastAt = now
        lastCPU = process
        lastSent = t.sent
        lastAnswered = t.answered
    }

    private func write(_ line: String) {
        handle.write(Data((line + "\n").utf8))
    }

    /// A file's size, or everything under a directory (a PostgreSQL data directory);
    /// 0 when it is not there (yet).
    static func bytes(at path: String) -> Int64 {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return 0 }
        guard isDirectory.boolValue else {
            return ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
        }
        var total: Int64 = 0
        let url = URL(fileURLWithPath: path)
        if let files = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.fileSizeKey, .isRegularFileKey]) {
            for case let file as URL in files {
                let values = try? file.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey])
                if values?.isRegularFile == true { total += Int64(values?.fileSize ?? 0) }
            }
        }
        return total
    }
}
