#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// Hosts of the tests' own, for network faults: one network namespace per host, each with
/// one address on a /24 behind a bridge that lives in a namespace of its own (the
/// switch), so the lab touches nothing outside its namespaces: no interface, address,
/// route or firewall rule of the machine's own network.
///
///     switch namespace:  br0 ── v-broker, v-pg, v-c1, ...  (one veth end per host)
///     host namespace:    lo, eth0 = 10.77.0.N/24            (the other end)
///
/// Processes run in a host with ``command(_:_:)`` (`ip netns exec`, which execs, so a
/// ``ChildProcess``'s PID is the process's own). The test process reaches into a host
/// through a portal (``portal(into:to:delayMs:)``, Tests/netlab/portal.py): a loopback port
/// of its own whose connections leave from inside that host, and so meet its faults.
///
/// Faults: ``cut(_:)`` / ``heal(_:)`` take a host's link down and up (both ways, as a
/// pulled cable); ``drop(from:to:)`` drops what one host receives from another (one
/// direction, with iptables in the receiver); ``loss(_:percent:)`` drops a share of
/// a host's packets both ways. Netem is missing on this kernel: delay is the portal's.
///
/// Needs root, `ip` (iproute2) and `iptables`; ``isAvailable`` says whether this machine
/// can. ``withNetLab(hosts:_:)`` removes every namespace (with its links and rules) at
/// the end, also when the test throws, and a lab left by a killed test run is removed
/// by the next one (its namespaces carry the dead process's PID).
public final class NetLab: Sendable {
    public struct Host: Sendable, Hashable {
        public let name: String
        public let namespace: String
        public let address: String
    }

    public let prefix: String
    public let hosts: [String: Host]
    let switchNamespace: String
    let portals = Mutex<[ChildProcess]>([])
    let torn = Mutex(false)

    static let namespacePrefix = "tandemlab"

    /// Whether the lab can run here: root, `ip` and `iptables`, and namespaces allowed.
    public static var isAvailable: Bool {
        guard geteuid() == 0, ChildProcess.findExecutable("ip") != nil, ChildProcess.findExecutable("iptables") != nil else { return false }
        return FileManager.default.fileExists(atPath: "/proc/self/ns/net")
    }

    /// Makes the namespaces, the switch and one link per host (`names`: short, at most
    /// 10 characters of a-z 0-9).
    public static func start(hosts names: [String]) async throws -> NetLab {
        try await removeStale()
        let prefix = "\(namespacePrefix)-\(getpid())-\(UInt16.random(in: 0...UInt16.max))"
        var hosts: [String: Host] = [:]
        for (i, name) in names.enumerated() {
            hosts[name] = Host(name: name, namespace: "\(prefix)-\(name)", address: "10.77.0.\(i + 2)")
        }
        let lab = NetLab(prefix: prefix, hosts: hosts)
        do {
            let sw = lab.switchNamespace
            try await ip(["netns", "add", sw])
            try await ip(["-n", sw, "link", "add", "br0", "type", "bridge"])
            try await ip(["-n", sw, "link", "set", "br0", "up"])
            try await ip(["-n", sw, "link", "set", "lo", "up"])
            for name in names {
                let host = hosts[name]!
                try await ip(["netns", "add", host.namespace])
                try await ip(["-n", host.namespace, "link", "set", "lo", "up"])
                try await ip(["-n", sw, "link", "add", "v-\(name)", "type", "veth", "peer", "name", "eth0", "netns", host.namespace])
                try await ip(["-n", sw, "link", "set", "v-\(name)", "master", "br0"])
                try await ip(["-n", sw, "link", "set", "v-\(name)", "up"])
                try await ip(["-n", host.namespace, "addr", "add", "\(host.address)/24", "dev", "eth0"])
                try await ip(["-n", host.namespace, "link", "set", "eth0", "up"])
            }
        } catch {
            await lab.tearDown()
            throw error
        }
        return lab
    }

    init(prefix: String, hosts: [String: Host]) {
        self.prefix = prefix
        self.hosts = hosts
        switchNamespace = "\(prefix)-switch"
    }

    public subscript(_ name: String) -> Host { hosts[name]! }

    /// `argv` run inside `host`: `ip netns exec NAMESPACE argv...`.
    public func command(_ host: String, _ argv: [String]) -> (executable: String, arguments: [String]) {
        (ChildProcess.findExecutable("ip") ?? "/usr/sbin/ip", ["netns", "exec", self[host].namespace] + argv)
    }

    /// A loopback port of the test process whose connections are made from inside
    /// `host` to `address`:`port`, each chunk held `delayMs` each way.
    public func portal(into host: String, to address: String, port: Int, delayMs: Int = 0) async throws -> Int {
        let script = MosquittoBroker.repositoryRoot + "/Tests/netlab/portal.py"
        let child = try ChildProcess(
            "/usr/bin/python3", ["-u", script, "--netns", self[host].namespace, "--to", "\(address):\(port)", "--delay-ms", String(delayMs)])
        portals.withLock { $0.append(child) }
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let line = child.standardOutput.split(separator: "\n").first, let port = Int(line) { return port }
            guard child.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw NetLabError.command("portal.py into \(host)", child.standardError)
    }

    // MARK: Faults

    /// Takes `host`'s link down at the switch: nothing goes in or out, as a pulled cable.
    public func cut(_ host: String) async throws {
        try await Self.ip(["-n", switchNamespace, "link", "set", "v-\(host)", "down"])
    }

    public func heal(_ host: String) async throws {
        try await Self.ip(["-n", switchNamespace, "link", "set", "v-\(host)", "up"])
    }

    /// `to` no longer receives what `from` sends (TCP's answers included, so a
    /// connection `from` opens to `to` sees no answer either): one direction of a cut.
    public func drop(from: String, to: String) async throws {
        try await iptables(to, ["-A", "INPUT", "-s", self[from].address, "-j", "DROP"])
    }

    public func undrop(from: String, to: String) async throws {
        try await iptables(to, ["-D", "INPUT", "-s", self[from].address, "-j", "DROP"])
    }

    /// Both directions between two hosts, dropped at both ends: a cut between them
    /// alone (each still reaches the others). Dropping only outgoing packets would make
    /// the sender's own kernel answer EPERM at once, which no real cut does.
    public func separate(_ a: String, _ b: String) async throws {
        try await drop(from: a, to: b)
        try await drop(from: b, to: a)
    }

    public func join(_ a: String, _ b: String) async throws {
        try await undrop(from: a, to: b)
        try await undrop(from: b, to: a)
    }

    /// Drops `percent` of the packets `host` sends and receives, at random.
    public func loss(_ host: String, percent: Int) async throws {
        let p = String(Double(percent) / 100)
        for (chain, direction) in [("INPUT", "-i"), ("OUTPUT", "-o")] {
            try await iptables(host, ["-A", chain, direction, "eth0", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"])
        }
    }

    /// Removes every rule in `host` (loss, drops).
    public func clearRules(_ host: String) async throws {
        try await iptables(host, ["-F"])
    }

    func iptables(_ host: String, _ args: [String]) async throws {
        let (executable, arguments) = command(host, [ChildProcess.findExecutable("iptables") ?? "/usr/sbin/iptables", "-w"] + args)
        let result = try await ChildProcess.run(executable, arguments)
        guard result.exitCode == 0 else { throw NetLabError.command("iptables \(args.joined(separator: " ")) in \(host)", result.standardError) }
    }

    // MARK: Setting up and tearing down

    static func ip(_ args: [String]) async throws {
        let result = try await ChildProcess.run(ChildProcess.findExecutable("ip") ?? "/usr/sbin/ip", args)
        guard result.exitCode == 0 else { throw NetLabError.command("ip \(args.joined(separator: " "))", result.standardError) }
    }

    /// Kills what still runs inside the lab's namespaces, stops the portals, deletes the
    /// namespaces (their links and rules go with them). Safe to call twice.
    public func tearDown() async {
        guard torn.withLock({ t in defer { t = true }; return !t }) else { return }
        for portal in portals.withLock({ $0 }) {
            portal.signal(SIGKILL)
            _ = await portal.waitForTermination(timeout: .seconds(5))
        }
        let namespaces = [switchNamespace] + hosts.values.map(\.namespace)
        await Self.delete(namespaces)
    }

    static func delete(_ namespaces: [String]) async {
        for namespace in namespaces {
            // Whatever a test left running in it (pids: `ip netns pids`).
            if let pids = try? await ChildProcess.run(ChildProcess.findExecutable("ip") ?? "/usr/sbin/ip", ["netns", "pids", namespace]) {
                for pid in pids.standardOutput.split(whereSeparator: \.isWhitespace).compactMap({ pid_t($0) }) { kill(pid, SIGKILL) }
            }
            _ = try? await ChildProcess.run(ChildProcess.findExecutable("ip") ?? "/usr/sbin/ip", ["netns", "delete", namespace])
        }
    }

    /// Namespaces of labs whose test process is gone.
    static func removeStale() async throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/var/run/netns")) ?? []
        let stale = names.filter { name in
            let parts = name.split(separator: "-")
            guard parts.count >= 3, parts[0] == namespacePrefix, let pid = pid_t(parts[1]) else { return false }
            return kill(pid, 0) != 0 && errno == ESRCH
        }
        await delete(stale)
    }
}

public enum NetLabError: Error, CustomStringConvertible {
    case command(String, String)

    public var description: String {
        switch self {
        case .command(let what, let error): "\(what) failed: \(error)"
        }
    }
}

/// A lab with `hosts`, torn down when `body` ends or throws.
public func withNetLab<T>(hosts: [String], _ body: (NetLab) async throws -> T) async throws -> T {
    let lab = try await NetLab.start(hosts: hosts)
    do {
        let result = try await body(lab)
        await lab.tearDown()
        return result
    } catch {
        await lab.tearDown()
        throw error
    }
}
