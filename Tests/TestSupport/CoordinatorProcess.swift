import Foundation
import TandemCore

/// The built `tandem-coordinator`, run as a child process against a test broker, with
/// its database in a directory that outlives restarts of the process.
public final class CoordinatorProcess: Sendable {
    public let broker: MosquittoBroker
    public let databasePath: String
    public let extraArguments: [String]
    let current: LockedBox<ChildProcess?>
    public let logPath: String

    /// Where `swift test` put the binaries: beside the test bundle.
    public static func binary(_ name: String) -> String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = bundle.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        // Fall back to the package's default debug build.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/\(name)").path
    }

    /// Starts the coordinator and waits until it says online on `coordinator/status`.
    /// `arguments` are added to the connection flags (e.g. `--lock-lease-seconds 1`).
    /// `databasePath` puts the database somewhere else than beside the logs (a small or
    /// read-only file system in the storage fault tests).
    /// `environment` is added to the process's (libfaketime's variables, say).
    public static func start(
        broker: MosquittoBroker, arguments: [String] = [], databaseDirectory: String? = nil, databasePath: String? = nil,
        environment: [String: String] = [:]
    ) async throws -> CoordinatorProcess {
        let directory = try databaseDirectory ?? makeTemporaryDirectory(prefix: "coordinator-")
        let process = CoordinatorProcess(
            broker: broker, databasePath: databasePath ?? directory + "/tandem.sqlite", arguments: arguments,
            logPath: directory + "/coordinator.log", environment: environment)
        try await process.start()
        return process
    }

    let environment: [String: String]

    init(broker: MosquittoBroker, databasePath: String, arguments: [String], logPath: String, environment: [String: String] = [:]) {
        self.environment = environment
        self.broker = broker
        self.databasePath = databasePath
        self.extraArguments = arguments
        self.logPath = logPath
        self.current = LockedBox(nil)
    }

    public var connectionArguments: [String] {
        // A test that gives the password another way (--password-file) gives only that.
        Self.brokerArguments(broker, password: !extraArguments.contains("--password-file")) + ["--database", databasePath]
    }

    /// A file holding the demo coordinator-admin password, made once per test run.
    static let adminPasswordFile: String? = {
        guard let directory = try? makeTemporaryDirectory(prefix: "admin-") else { return nil }
        let path = directory + "/coordinator-admin.password"
        return (try? "coordinator-admin-demo\n".write(toFile: path, atomically: true, encoding: .utf8)) != nil ? path : nil
    }()

    /// `--host`, `--port`, and on the shipped broker the demo coordinator user and its
    /// admin account.
    public static func brokerArguments(_ broker: MosquittoBroker, password: Bool = true) -> [String] {
        var args = broker.lab.map { ["--host", $0.address, "--port", String($0.port)] } ?? ["--host", broker.host, "--port", String(broker.port)]
        if broker.configuration.authenticates {
            args += ["--username", "coordinator"]
            if password { args += ["--password", "coordinator-demo"] }
            // The shipped broker withholds rooms from non-members: the coordinator
            // administers who reads them with its own admin account.
            if let file = adminPasswordFile {
                args += ["--broker-admin-username", "coordinator-admin", "--broker-admin-password-file", file]
            }
        }
        return args
    }

    /// (Re)starts the process and waits for its retained `{"online":true,...}` with a
    /// `startedAt` from this start.
    public func start() async throws {
        let before = Int64(Date().timeIntervalSince1970 * 1000) - 1
        // With a preloaded library (libfaketime) the binary starts through /usr/bin/env:
        // libfaketime's constructor edits the environment of the first preloaded process
        // it runs in, and a Swift binary that is that process then finds no arguments
        // (the runtime locates them next to the environment). Through env, env is it.
        let binary = Self.binary("tandem-coordinator")
        let (executable, arguments) = environment["LD_PRELOAD"] == nil
            ? (binary, connectionArguments + extraArguments)
            : ("/usr/bin/env", [binary] + connectionArguments + extraArguments)
        let child = try ChildProcess(
            executable, arguments,
            addingEnvironment: ["TANDEM_LOG_LEVEL": "debug"].merging(environment) { _, given in given },
            standardOutput: logPath + ".\(before).out", standardError: logPath + ".\(before).err")
        current.set(child)
        let watcher = try await TestPeer.connect(broker: broker, user: "coordinator-watcher-\(UInt32.random(in: 0...UInt32.max))", asCoordinatorWatcher: true)
        defer { Task { await watcher.close() } }
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if let status = watcher.latest(on: Topics().coordinatorStatus),
               status["online"]?.boolValue == true, let startedAt = status["startedAt"]?.int64Value, startedAt >= before {
                return
            }
            if !child.isRunning {
                throw CoordinatorError.exited(child.standardError)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw CoordinatorError.notOnline(child.standardError)
    }

    public var process: ChildProcess? { current.get() }

    /// SIGKILL: no drain, no offline status (the will says it).
    public func kill() async {
        guard let child = current.get() else { return }
        child.signal(SIGKILL)
        _ = await child.waitForExit(timeout: .seconds(10))
    }

    /// SIGTERM and wait; returns the exit code.
    @discardableResult
    public func stop() async -> Int32? {
        guard let child = current.get() else { return nil }
        child.signal(SIGTERM)
        return await child.waitForExit(timeout: .seconds(15))
    }

    public var standardError: String { current.get()?.standardError ?? "" }

    public enum CoordinatorError: Error, CustomStringConvertible {
        case exited(String)
        case notOnline(String)
        public var description: String {
            switch self {
            case .exited(let log): "tandem-coordinator exited before going online:\n\(log)"
            case .notOnline(let log): "tandem-coordinator did not go online in time:\n\(log)"
            }
        }
    }
}

/// A value behind a lock, for test fixtures shared across tasks.
public final class LockedBox<Value: Sendable>: Sendable {
    let lock = NSLock()
    nonisolated(unsafe) var value: Value

    public init(_ value: Value) {
        self.value = value
    }

    public func get() -> Value {
        lock.lock()
        defer { lock.unlock() }
        return value
    }

    public func set(_ newValue: Value) {
        lock.lock()
        defer { lock.unlock() }
        value = newValue
    }

    public func update<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
