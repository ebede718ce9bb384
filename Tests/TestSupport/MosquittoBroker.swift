#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// Which configuration a test broker runs.
public enum BrokerConfiguration: Sendable {
    /// The shipped settings without authentication or ACL: anonymous clients may do
    /// anything. For plain MQTT client tests. `autosave_interval` is 1 s, so even a
    /// broker killed with SIGKILL keeps (almost) everything across ``MosquittoBroker/restart(graceful:)``.
    case open
    /// Exactly the shipped broker-config/ (mosquitto.conf and the dynamic-security
    /// plugin with dynamic-security.json: the demo users, coordinator-admin and admin)
    /// from this repository, with only the listener (a free loopback port), the plugin's
    /// path (as installed here) and the file and persistence paths (a temporary copy of
    /// the file, which the plugin rewrites) replaced: a test against it proves the
    /// configuration users run.
    case shipped
    /// The shipped mosquitto.conf with the `dynamic-security.json` of this folder instead
    /// (as written by scripts/gen-broker-auth, e.g. for another topic root).
    case generated(String)

    /// Whether clients log in (the demo users and their `NAME-demo` passwords).
    public var authenticates: Bool {
        if case .open = self { return false }
        return true
    }
}

/// A real mosquitto for a test, on a free loopback port, with its files (generated
/// configuration, persistence, log) in a temporary directory of its own.
///
///     try await withBroker(.shipped) { broker in
///         // connect to broker.host:broker.port
///     }
///
/// A broker that cannot be started is an error, never a skip: without mosquitto the
/// tests that need it fail and say how to install it.
public final class MosquittoBroker: Sendable {
    public let configuration: BrokerConfiguration
    /// Where a test process connects: the loopback address (the broker listens on
    /// nothing else), or in a ``NetLab`` a portal's.
    public let host = "127.0.0.1"
    /// The port clients connect to. In a lab, a portal that leaves from the clients'
    /// host (so their connections meet its faults).
    public let port: Int
    /// The port watchers connect to (``TestPeer/connect(broker:user:password:asCoordinatorWatcher:will:extraFilters:)``
    /// with `asCoordinatorWatcher`): ``port``, or in a lab a portal from inside the
    /// broker's own host, which no fault between hosts reaches.
    public let observerPort: Int
    /// In a lab: the host the broker runs in and the address and port other hosts dial.
    public let lab: Placement?

    public struct Placement: Sendable {
        public let lab: NetLab
        public let host: String
        public let address: String
        public let port: Int
    }
    /// The temporary directory holding everything below; removed on deinit.
    public let directory: String
    /// The generated mosquitto.conf.
    public let configurationPath: String
    /// mosquitto's log (its stdout and stderr, appended across restarts).
    public let logPath: String
    /// The persistence directory (kept across restarts).
    public let dataDirectory: String
    /// The dynamic-security plugin's file (in ``dataDirectory``; the plugin rewrites it on
    /// every change), nil for ``BrokerConfiguration/open``. A test may replace it while
    /// the broker is stopped, e.g. with an older copy.
    public var dynamicSecurityPath: String? {
        if case .open = configuration { return nil }
        return dataDirectory + "/dynamic-security.json"
    }
    public let executable: String
    /// The TLS listener's port, when the broker was started with certificates.
    public let tlsPort: Int?
    /// The folder of certificates (scripts/make-certs) the TLS listener uses.
    public let certificates: String?

    private let process: Mutex<ChildProcess?>

    private init(
        configuration: BrokerConfiguration, port: Int, directory: String, executable: String,
        tlsPort: Int? = nil, certificates: String? = nil, observerPort: Int? = nil, lab: Placement? = nil
    ) {
        self.observerPort = observerPort ?? port
        self.lab = lab
        self.tlsPort = tlsPort
        self.certificates = certificates
        self.configuration = configuration
        self.port = port
        self.directory = directory
        self.configurationPath = directory + "/mosquitto.conf"
        self.logPath = directory + "/mosquitto.log"
        self.dataDirectory = directory + "/data"
        self.executable = executable
        self.process = Mutex(nil)
    }

    deinit {
        // Dropping the ChildProcess kills it (SIGKILL) if it is still running.
        process.withLock { $0 = nil }
        if ProcessInfo.processInfo.environment["TANDEM_KEEP_BROKER_FILES"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Starts mosquitto and returns once it accepts TCP connections.
    /// With `certificates` (a folder made by scripts/make-certs), a second listener on
    /// ``tlsPort`` speaks TLS with them, as broker-config/tls/tls.conf does in compose.
    public static func start(configuration: BrokerConfiguration, certificates: String? = nil) async throws -> MosquittoBroker {
        guard let executable = ChildProcess.findExecutable(
            ProcessInfo.processInfo.environment["TANDEM_MOSQUITTO"] ?? "mosquitto")
        else {
            throw BrokerError.mosquittoMissing
        }
        // A port free a moment ago can be taken before mosquitto binds it (by a
        // client's ephemeral port, say): then try another.
        var attempt = 1
        while true {
            let directory = try makeTemporaryDirectory(prefix: "mosquitto-")
            let broker = MosquittoBroker(
                configuration: configuration, port: try freeTCPPort(), directory: directory,
                executable: executable, tlsPort: certificates == nil ? nil : try freeTCPPort(), certificates: certificates)
            try FileManager.default.createDirectory(
                atPath: broker.dataDirectory, withIntermediateDirectories: true)
            try broker.writeConfiguration()
            do {
                try await broker.launch()
                return broker
            } catch BrokerError.exited(_, let log) where attempt < 3 && log.contains("Address already in use") {
                attempt += 1
            }
        }
    }

    /// Starts mosquitto inside `host` of `lab` (listening on its lab address, port 1883),
    /// with a portal for the clients from `clientsHost` (chunks held `clientDelayMs` each
    /// way) as ``port`` and one from the broker's own host as ``observerPort``.
    public static func start(
        configuration: BrokerConfiguration, in lab: NetLab, host: String, clientsHost: String, clientDelayMs: Int = 0
    ) async throws -> MosquittoBroker {
        guard let executable = ChildProcess.findExecutable(
            ProcessInfo.processInfo.environment["TANDEM_MOSQUITTO"] ?? "mosquitto")
        else {
            throw BrokerError.mosquittoMissing
        }
        let placement = Placement(lab: lab, host: host, address: lab[host].address, port: 1883)
        let clients = try await lab.portal(into: clientsHost, to: placement.address, port: placement.port, delayMs: clientDelayMs)
        let observer = try await lab.portal(into: host, to: placement.address, port: placement.port)
        let broker = MosquittoBroker(
            configuration: configuration, port: clients, directory: try makeTemporaryDirectory(prefix: "mosquitto-"),
            executable: executable, observerPort: observer, lab: placement)
        try FileManager.default.createDirectory(atPath: broker.dataDirectory, withIntermediateDirectories: true)
        try broker.writeConfiguration()
        try await broker.launch()
        return broker
    }

    /// Whether the mosquitto process is running.
    public var isRunning: Bool {
        process.withLock { $0?.isRunning ?? false }
    }

    /// The process id of the running mosquitto, if any.
    public var pid: pid_t? {
        process.withLock { $0?.isRunning == true ? $0?.pid : nil }
    }

    /// What mosquitto has logged so far (including earlier runs of this broker).
    public var log: String {
        FileManager.default.contents(atPath: logPath).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// Kills the broker (SIGKILL) and waits until it is gone. What it had not saved
    /// yet is lost, like in a crash. Safe to call more than once.
    public func stop() async {
        guard let child = process.withLock({ $0 }) else { return }
        child.signal(SIGKILL)
        _ = await child.waitForTermination(timeout: .seconds(10))
        process.withLock { $0 = nil }
    }

    /// Stops the broker with SIGTERM, which makes mosquitto save its database
    /// (retained messages, persistent sessions, queued messages) before it exits,
    /// and waits for it (SIGKILL after `timeout`).
    public func stopGracefully(timeout: Duration = .seconds(10)) async {
        guard let child = process.withLock({ $0 }) else { return }
        child.signal(SIGTERM)
        if await child.waitForTermination(timeout: timeout) == nil {
            child.signal(SIGKILL)
            _ = await child.waitForTermination(timeout: .seconds(10))
        }
        process.withLock { $0 = nil }
    }

    /// Stops the broker and starts it again on the same port with the same
    /// persistence directory: for "reconnect after the broker restarts" tests.
    /// `graceful` (the default) stops it with SIGTERM so its database is saved
    /// first; `graceful: false` kills it (SIGKILL), like a crash.
    public func restart(graceful: Bool = true, whileStopped: () async throws -> Void = {}) async throws {
        if graceful { await stopGracefully() } else { await stop() }
        try await whileStopped()
        try await launch()
    }

    // MARK: - Internals

    private func launch() async throws {
        if let lab {
            let (ip, arguments) = lab.lab.command(lab.host, [executable, "-c", configurationPath])
            let child = try ChildProcess(ip, arguments, standardOutput: logPath, standardError: logPath)
            // A portal accepts whether or not the broker listens behind it: wait until the
            // broker's namespace has a socket listening on the port (its /proc/PID/net/tcp).
            let startedAt = ContinuousClock.now
            let listening = String(format: ":%04X 00000000:0000 0A", lab.port)
            while !((try? String(contentsOfFile: "/proc/\(child.pid)/net/tcp", encoding: .utf8))?.contains(listening) ?? false) {
                if let termination = child.termination { throw BrokerError.exited(termination, log: log) }
                if ContinuousClock.now - startedAt > .seconds(5) {
                    child.signal(SIGKILL)
                    _ = await child.waitForTermination(timeout: .seconds(5))
                    throw BrokerError.notListening(port: lab.port, log: log)
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            process.withLock { $0 = child }
            return
        }
        let child = try ChildProcess(
            executable, ["-c", configurationPath],
            standardOutput: logPath, standardError: logPath)
        let startedAt = ContinuousClock.now
        while !acceptsTCPConnections(port: port) {
            if let termination = child.termination {
                throw BrokerError.exited(termination, log: log)
            }
            if ContinuousClock.now - startedAt > .seconds(5) {
                child.signal(SIGKILL)
                _ = await child.waitForTermination(timeout: .seconds(5))
                throw BrokerError.notListening(port: port, log: log)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        // Someone else listening on the port would also accept: then mosquitto
        // fails to bind and exits at once. Make sure it is still there.
        try await Task.sleep(for: .milliseconds(20))
        if let termination = child.termination {
            throw BrokerError.exited(termination, log: log)
        }
        process.withLock { $0 = child }
    }

    private func writeConfiguration() throws {
        let configDirectory = Self.repositoryRoot + "/broker-config"
        let shipped: String
        do {
            shipped = try String(contentsOfFile: configDirectory + "/mosquitto.conf", encoding: .utf8)
        } catch {
            throw BrokerError.configuration("cannot read \(configDirectory)/mosquitto.conf: \(error)")
        }

        var replacements = [
            "listener": lab.map { "listener \($0.port) \($0.address)" } ?? "listener \(port) \(host)",
            "persistence_location": "persistence_location \(dataDirectory)/",
        ]
        // The container's TLS folder; a TLS listener with local paths is added below.
        var dropped: Set<String> = ["include_dir"]
        switch configuration {
        case .shipped, .generated:
            var source = configDirectory
            if case .generated(let folder) = configuration { source = folder }
            guard let plugin = Self.dynamicSecurityPlugin else {
                throw BrokerError.configuration(
                    "mosquitto's dynamic-security plugin (mosquitto_dynamic_security.so) is not installed "
                        + "(looked in /usr/lib and /usr/local/lib; set TANDEM_DYNSEC_PLUGIN to its path)")
            }
            // The plugin writes to its file: a copy, never the repository's.
            try FileManager.default.copyItem(
                atPath: source + "/dynamic-security.json", toPath: dataDirectory + "/dynamic-security.json")
            replacements["plugin"] = "plugin \(plugin)"
            replacements["plugin_opt_config_file"] = "plugin_opt_config_file \(dataDirectory)/dynamic-security.json"
        case .open:
            dropped.formUnion(["plugin", "plugin_opt_config_file"])
            replacements["allow_anonymous"] = "allow_anonymous true"
            replacements["autosave_interval"] = "autosave_interval 1"
        }

        var seen: [String: Int] = [:]
        var lines: [String] = ["# Generated for a test from \(configDirectory)/mosquitto.conf"]
        for line in shipped.split(separator: "\n", omittingEmptySubsequences: false) {
            let key = line.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
            guard replacements[key] != nil || dropped.contains(key) else {
                lines.append(String(line))
                continue
            }
            seen[key, default: 0] += 1
            if let replacement = replacements[key] { lines.append(replacement) }
        }
        for key in Set(replacements.keys).union(dropped) where seen[key] != 1 {
            throw BrokerError.configuration(
                "broker-config/mosquitto.conf must have exactly one '\(key) ...' line, found \(seen[key] ?? 0)")
        }
        if let tlsPort, let certificates {
            lines += [
                "listener \(tlsPort) \(host)", "certfile \(certificates)/server.crt", "keyfile \(certificates)/server.key",
                "cafile \(certificates)/ca.crt", "tls_version tlsv1.2",
            ]
        }
        // As root, mosquitto would switch to the `mosquitto` user, which cannot read
        // this private temporary directory: stay who we are.
        lines.append("user \(Self.currentUserName)")
        try lines.joined(separator: "\n").write(toFile: configurationPath, atomically: true, encoding: .utf8)
    }

    /// The repository this file is in: Tests/TestSupport/MosquittoBroker.swift.
    public static var repositoryRoot: String {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // TestSupport
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the repository
            .path
    }

    /// mosquitto_dynamic_security.so: $TANDEM_DYNSEC_PLUGIN, or where Debian, Alpine
    /// (the eclipse-mosquitto image) or a source build put it.
    public static var dynamicSecurityPlugin: String? {
        if let path = ProcessInfo.processInfo.environment["TANDEM_DYNSEC_PLUGIN"] {
            return FileManager.default.fileExists(atPath: path) ? path : nil
        }
        var candidates = ["/usr/lib/mosquitto_dynamic_security.so", "/usr/local/lib/mosquitto_dynamic_security.so"]
        if let multiarch = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib") {
            candidates = multiarch.filter { $0.hasSuffix("-linux-gnu") }.sorted()
                .map { "/usr/lib/\($0)/mosquitto_dynamic_security.so" } + candidates
        }
        return candidates.first { FileManager.default.fileExists(atPath: $0) }
    }

    private static var currentUserName: String {
        if let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name {
            return String(cString: name)
        }
        return ProcessInfo.processInfo.environment["USER"] ?? "root"
    }
}

public enum BrokerError: Error, CustomStringConvertible {
    case mosquittoMissing
    case configuration(String)
    case exited(ChildProcess.Termination, log: String)
    case notListening(port: Int, log: String)

    public var description: String {
        switch self {
        case .mosquittoMissing:
            "mosquitto is not installed (looked on PATH and in /usr/sbin, or set TANDEM_MOSQUITTO): "
                + "install it, e.g. `apt-get install mosquitto mosquitto-clients`. "
                + "Tests that need a broker fail without it; they are never skipped."
        case .configuration(let message):
            message
        case .exited(let termination, let log):
            "mosquitto exited during startup (\(termination)). Its log:\n\(log)"
        case .notListening(let port, let log):
            "mosquitto did not accept connections on 127.0.0.1:\(port) within 5 s. Its log:\n\(log)"
        }
    }
}

/// Starts a broker, runs `body` with it, and stops it (SIGKILL) however `body` ends.
public func withBroker<T>(
    _ configuration: BrokerConfiguration = .open,
    certificates: String? = nil,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (MosquittoBroker) async throws -> T
) async throws -> T {
    let broker = try await MosquittoBroker.start(configuration: configuration, certificates: certificates)
    do {
        let result = try await body(broker)
        await broker.stop()
        return result
    } catch {
        await broker.stop()
        throw error
    }
}

/// A new folder of certificates made by scripts/make-certs (a CA, the broker's for
/// localhost and 127.0.0.1, a client's), the way the docs tell a person to make them.
public func makeCertificates() async throws -> String {
    let directory = try makeTemporaryDirectory(prefix: "certs-")
    // Three RSA keys: well under a second on an idle machine, but a loaded one (the
    // whole suite at once, on 2 cores) once took over the default 30 s.
    let made = try await ChildProcess.run(
        "/bin/bash", [MosquittoBroker.repositoryRoot + "/scripts/make-certs", directory, "localhost", "127.0.0.1"], timeout: .seconds(120))
    guard made.exitCode == 0 else {
        throw BrokerError.configuration("scripts/make-certs failed: \(made.standardError)")
    }
    return directory
}
