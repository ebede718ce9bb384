import Foundation
import Synchronization
import TandemCore

/// Several built `tandem-coordinator` processes on one PostgreSQL database and one
/// broker, each with its own `--instance-id`, for the failover tests: start them, find
/// the leader from the retained `coordinator/status`, kill, freeze and restart them.
///
/// Every launch writes its standard error to a file of its own in ``directory``
/// (`<instance>.<n>.log`), so a test can read what a process said before it was killed.
public final class CoordinatorCluster: Sendable {
    public let broker: MosquittoBroker
    public let databaseURL: String
    public let directory: String
    public let arguments: [String]
    /// Added to one instance's arguments (`--metrics-port`, say), at every launch.
    public let perInstance: [String: [String]]
    public let watcher: TestPeer
    private let processes = Mutex<[String: ChildProcess]>([:])
    private let launches = Mutex<[String: Int]>([:])

    /// A running leader as `coordinator/status` says.
    public struct Leader: Sendable, Equatable {
        public var instance: String
        public var term: Int64
        public var startedAt: Int64
    }

    /// Starts one process per name in `instances`, in order, and waits until one of them
    /// says it leads. `arguments` are added to each (`--leader-lease-seconds 2`, ...).
    public static func start(
        broker: MosquittoBroker, databaseURL: String, instances: [String], arguments: [String] = [],
        perInstance: [String: [String]] = [:], hosts: [String: String] = [:]
    ) async throws -> CoordinatorCluster {
        let watcher = try await TestPeer.connect(
            broker: broker, user: "cluster-watcher-\(UInt32.random(in: 0...UInt32.max))", asCoordinatorWatcher: true,
            extraFilters: [Topics().coordinatorInstance("+")])
        let cluster = CoordinatorCluster(
            broker: broker, databaseURL: databaseURL, directory: try makeTemporaryDirectory(prefix: "cluster-"),
            arguments: arguments, perInstance: perInstance, watcher: watcher, hosts: hosts)
        for instance in instances { try cluster.launch(instance) }
        _ = try await cluster.waitForLeader(timeout: .seconds(30))
        return cluster
    }

    /// In a lab (the broker's ``MosquittoBroker/lab``): the host each instance runs in.
    public let hosts: [String: String]

    init(broker: MosquittoBroker, databaseURL: String, directory: String, arguments: [String], perInstance: [String: [String]],
         watcher: TestPeer, hosts: [String: String] = [:]) {
        self.hosts = hosts
        self.perInstance = perInstance
        self.broker = broker
        self.databaseURL = databaseURL
        self.directory = directory
        self.arguments = arguments
        self.watcher = watcher
    }

    /// Starts `instance` (again): it becomes a standby, or the leader if the lease is free.
    public func launch(_ instance: String) throws {
        let args = CoordinatorProcess.brokerArguments(broker) + ["--database", databaseURL, "--instance-id", instance]
        let n = launches.withLock { $0[instance, default: 0] += 1; return $0[instance]! }
        let log = "\(directory)/\(instance).\(n).log"
        var (executable, all) = (CoordinatorProcess.binary("tandem-coordinator"), args + arguments + (perInstance[instance] ?? []))
        if let lab = broker.lab?.lab, let host = hosts[instance] { (executable, all) = lab.command(host, [executable] + all) }
        let child = try ChildProcess(
            executable, all,
            addingEnvironment: ["TANDEM_LOG_LEVEL": "info"], standardOutput: log, standardError: log)
        processes.withLock { $0[instance] = child }
    }

    public func process(_ instance: String) -> ChildProcess? { processes.withLock { $0[instance] } }
    public var instances: [String] { processes.withLock { Array($0.keys).sorted() } }

    /// What the retained `coordinator/status` says now, if it says someone leads.
    public var leader: Leader? {
        guard let status = watcher.latest(on: watcher.topics.coordinatorStatus), status["online"]?.boolValue == true,
              let instance = status["instance"]?.stringValue, let term = status["term"]?.int64Value
        else { return nil }
        return Leader(instance: instance, term: term, startedAt: status["startedAt"]?.int64Value ?? 0)
    }

    /// Waits for a leader online with a term above `term`; returns it.
    public func waitForLeader(after term: Int64 = 0, timeout: Duration = .seconds(30)) async throws -> Leader {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let leader, leader.term > term { return leader }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw ClusterError.noLeader(after: term, logs: logs())
    }

    /// The retained `coordinator/instances/{instance}`.
    public func announcement(_ instance: String) -> JSON? {
        watcher.latest(on: watcher.topics.coordinatorInstance(instance))
    }

    /// The partitions each running process says it leads (its retained
    /// `coordinator/instances/{instance}`), for those that lead any.
    public var partitionsLed: [String: [Int]] {
        var led: [String: [Int]] = [:]
        for instance in instances where process(instance)?.isRunning == true {
            guard let announced = announcement(instance), announced["online"]?.boolValue == true,
                  case .array(let list)? = announced["partitions"] else { continue }
            let partitions = list.compactMap { $0.int64Value.map(Int.init) }
            if !partitions.isEmpty { led[instance] = partitions.sorted() }
        }
        return led
    }

    /// Waits until `condition` holds (checked every 20 ms); false after `timeout`.
    public func wait(timeout: Duration, until condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Everything `coordinator/status` said, in order (what the watcher heard).
    public var statusHistory: [JSON] { watcher.all(on: watcher.topics.coordinatorStatus) }

    public func signal(_ instance: String, _ signal: Int32) {
        process(instance)?.signal(signal)
    }

    /// SIGKILL and wait for the process to be gone.
    public func kill(_ instance: String) async {
        guard let child = process(instance) else { return }
        child.signal(SIGKILL)
        _ = await child.waitForTermination(timeout: .seconds(10))
    }

    /// SIGTERM every process still running; returns each one's exit code (nil: did not
    /// stop in time). Processes that had already ended (killed) are not in the answer.
    public func stopAll(timeout: Duration = .seconds(20)) async -> [String: Int32?] {
        let all = processes.withLock { $0 }.filter { $0.value.isRunning }
        for child in all.values { child.signal(SIGTERM) }
        var codes: [String: Int32?] = [:]
        for (instance, child) in all {
            codes[instance] = await child.waitForExit(timeout: timeout)
        }
        await watcher.close()
        return codes
    }

    /// Every thread's stack of `instance`'s process (gdb, when it is installed): what a
    /// test prints when a process stopped answering.
    public func stacks(_ instance: String) async -> String {
        guard let pid = process(instance)?.pid, let gdb = ChildProcess.findExecutable("gdb") else { return "(no gdb)" }
        let result = try? await ChildProcess.run(gdb, ["-p", String(pid), "-batch", "-ex", "thread apply all bt 25"], timeout: .seconds(60))
        return result.map { $0.standardOutput + $0.standardError } ?? "(gdb failed)"
    }

    /// Every launch's log of `instance`, oldest first, joined.
    public func log(_ instance: String) -> String {
        let n = launches.withLock { $0[instance] ?? 0 }
        return (1...max(1, n)).map { (try? String(contentsOfFile: "\(directory)/\(instance).\($0).log", encoding: .utf8)) ?? "" }
            .joined(separator: "\n")
    }

    /// The latest launch's log of `instance`.
    public func currentLog(_ instance: String) -> String {
        let n = launches.withLock { $0[instance] ?? 0 }
        return (try? String(contentsOfFile: "\(directory)/\(instance).\(n).log", encoding: .utf8)) ?? ""
    }

    func logs() -> String {
        instances.map { "--- \($0):\n\(String(log($0).suffix(3000)))" }.joined(separator: "\n")
    }

    /// Every instance's log lines that contain any of `words`, for a failure's message.
    public func logs(mentioning words: [String]) -> String {
        instances.map { instance in
            let lines = log(instance).split(separator: "\n").filter { line in words.contains { line.contains($0) } }
            return "--- \(instance):\n" + lines.suffix(60).joined(separator: "\n")
        }.joined(separator: "\n")
    }

    public enum ClusterError: Error, CustomStringConvertible {
        case noLeader(after: Int64, logs: String)
        public var description: String {
            switch self {
            case .noLeader(let term, let logs): "no coordinator went online with a term above \(term):\n\(logs)"
            }
        }
    }
}
