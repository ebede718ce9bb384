import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 18: what a newcomer meets following README.md and docs/RUNNING.md, the binaries
/// and scripts driven as a person drives them.
@Suite struct NewcomerTests {
    static let agent = CoordinatorProcess.binary("tandem-agent")
    static let coordinator = CoordinatorProcess.binary("tandem-coordinator")
    static let run = MosquittoBroker.repositoryRoot + "/scripts/run"

    // MARK: Messages that said the wrong thing

    /// The broker was reached: it was the account it turned away, and that is what both
    /// binaries say (before: "cannot reach the broker ... refused the connection: Not
    /// authorized").
    @Test(.timeLimit(.minutes(1)))
    func aWrongPasswordSaysTheCredentialsWereRefused() async throws {
        try await withBroker(.shipped) { broker in
            let agent = try await ChildProcess.run(Self.agent, [
                "logbook", "--port", String(broker.port), "--username", "alice", "--password", "wrong", "--connect-timeout", "10",
            ])
            #expect(agent.exitCode == 1)
            #expect(agent.standardError.contains("refused the credentials of user 'alice'"), "\(agent.standardError)")
            #expect(!agent.standardError.contains("cannot reach"), "\(agent.standardError)")

            let coordinator = try await ChildProcess.run(Self.coordinator, [
                "--port", String(broker.port), "--username", "coordinator", "--password", "wrong",
                "--database", try makeTemporaryDirectory(prefix: "db-") + "/t.sqlite",
            ])
            #expect(coordinator.exitCode == 1)
            #expect(coordinator.standardError.contains("refused the credentials of user 'coordinator'"), "\(coordinator.standardError)")
        }
    }

    /// Plain TCP to the TLS listener: the broker closes each connection without a word of
    /// MQTT. The agent says so and gives up at once, rather than "connection lost" after
    /// its whole connect timeout.
    @Test(.timeLimit(.minutes(1)))
    func plainTCPToTheTLSPortIsNamedAsSuch() async throws {
        let certs = try await makeCertificates()
        try await withBroker(.shipped, certificates: certs) { broker in
            let tlsPort = try #require(broker.tlsPort)
            let agent = try await ChildProcess.run(Self.agent, [
                "logbook", "--port", String(tlsPort), "--username", "alice", "--password", "alice-demo",
                "--connect-timeout", "600",
            ], timeout: .seconds(50))
            #expect(agent.exitCode == 1)
            #expect(agent.standardError.contains("closed it without an MQTT answer"), "\(agent.standardError)")
            #expect(agent.standardError.contains("a TLS listener needs --tls-ca-file"), "\(agent.standardError)")
            #expect(!agent.standardError.contains("connection lost"), "\(agent.standardError)")
        }
    }

    /// A misspelt flag is the error named, not the required flag it stood for.
    @Test func aMisspeltFlagIsNamedAsUnknown() async throws {
        let room = try await ChildProcess.run(Self.agent, ["room", "--rom", "photo1", "--user", "alice"])
        #expect(room.exitCode == 64)
        #expect(room.standardError.contains("Unknown option '--rom'"), "\(room.standardError)")
        #expect(!room.standardError.contains("Missing"), "\(room.standardError)")

        let history = try await ChildProcess.run(Self.agent, ["dm", "history", "bob", "--usr", "alice"])
        #expect(history.exitCode == 64)
        #expect(history.standardError.contains("Unknown option '--usr'"), "\(history.standardError)")

        // A missing one is still said as such, and values that look like flags after
        // `=` are not taken for flags.
        let missing = try await ChildProcess.run(Self.agent, ["room", "--user", "alice"])
        #expect(missing.exitCode == 64)
        #expect(missing.standardError.contains("Missing expected argument '--room <room>'"), "\(missing.standardError)")

        // `dm` is `dm chat`: the chat's own flags are known to it.
        let chat = try await ChildProcess.run(Self.agent, ["dm", "--user", "alice", "--port", "1", "--connect-timeout", "0.2", "--json"])
        #expect(chat.exitCode == 1, "\(chat.standardError)")
        #expect(!chat.standardError.contains("Unknown option"), "\(chat.standardError)")

        let coordinator = try await ChildProcess.run(Self.coordinator, ["--prot", "1884"])
        #expect(coordinator.exitCode == 64)
        #expect(coordinator.standardError.contains("--prot"), "\(coordinator.standardError)")
    }

    /// The agent reads a password file once too: `--password-file <(echo alice-demo)`.
    @Test(.timeLimit(.minutes(1)))
    func theAgentTakesAPasswordFromAPipe() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let logbook = try await ChildProcess.run("/bin/bash", ["-c",
                "exec '\(Self.agent)' logbook --port \(broker.port) --username alice --password-file <(echo alice-demo) --json",
            ])
            #expect(logbook.exitCode == 0, "\(logbook.standardError)")
            #expect(!logbook.standardError.contains("empty"), "\(logbook.standardError)")
            #expect(await coordinator.stop() == 0)
        }
    }

    /// One place declares a flag, its variable and its default: the help shows both, and
    /// a bad value in the environment names the variable.
    @Test func helpAndEnvironmentComeFromOneDeclaration() async throws {
        let help = try await ChildProcess.run(Self.coordinator, ["--help"])
        #expect(help.standardOutput.contains("[TANDEM_MQTT_PORT] (default: 1883)"), "\(help.standardOutput)")
        #expect(help.standardOutput.contains("[TANDEM_REORDER_WINDOW_MS] (default: 30)"), "\(help.standardOutput)")
        let agentHelp = try await ChildProcess.run(Self.agent, ["logbook", "--help"])
        #expect(agentHelp.standardOutput.contains("[TANDEM_MQTT_PORT] (default: 1883)"), "\(agentHelp.standardOutput)")

        for binary in [Self.coordinator, Self.agent] {
            let arguments = binary == Self.agent ? ["logbook", "--user", "alice"] : []
            var environment = ProcessInfo.processInfo.environment
            environment["TANDEM_MQTT_PORT"] = "eighteen"
            let bad = try await ChildProcess.run(binary, arguments, environment: environment)
            #expect(bad.exitCode == 64)
            #expect(bad.standardError.contains("TANDEM_MQTT_PORT=eighteen is not an integer"), "\(bad.standardError)")
        }
    }

    // MARK: Instances that piled up

    /// A clean stop's retained `{"online":false}` on `coordinator/instances/{id}` carries
    /// a message expiry: the broker drops it a minute later, so restarts leave no trail.
    @Test(.timeLimit(.minutes(1)))
    func aCleanStopLeavesAnInstanceTopicThatExpires() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--instance-id", "gone-soon"])
            #expect(await coordinator.stop() == 0)
            let retained = try await ChildProcess.run("mosquitto_sub", broker.arguments(user: "alice") + [
                "-V", "mqttv5", "-t", "tandem/v1/coordinator/instances/gone-soon", "-F", "%E %p", "-C", "1", "-W", "5",
            ])
            let line = retained.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            let parts = line.split(separator: " ", maxSplits: 1)
            #expect(parts.count == 2, "\(line)")
            let expiry = parts.first.flatMap { Int($0) }
            #expect(expiry.map { (1...60).contains($0) } == true, "no message expiry on the stopped instance: \(line)")
            #expect(parts.last.map { $0.contains("\"online\":false") } == true, "\(line)")
        }
    }

    // MARK: scripts/run

    /// A second `scripts/run` on the same data folder (another port) refuses at once and
    /// leaves the first's files alone: before, it rewrote data/mosquitto.conf under the
    /// running broker and started a second one on the same persistence.
    @Test(.timeLimit(.minutes(1)))
    func aSecondRunInTheSameFolderRefusesAndTouchesNothing() async throws {
        let data = try makeTemporaryDirectory(prefix: "run-data-")
        let (first, port) = try await startBrokerOnly(data: data)
        defer { first.signal(SIGKILL) }
        let configuration = try String(contentsOfFile: data + "/mosquitto.conf", encoding: .utf8)

        let otherPort = try freeTCPPort()
        for arguments in [["--broker-only"], []] {
            let second = try await ChildProcess.run("/bin/bash", [Self.run] + arguments, environment: Self.runEnvironment(data: data, port: otherPort))
            #expect(second.exitCode == 1, "\(second.standardError)")
            #expect(second.standardError.contains("\(data) is in use by another scripts/run"), "\(second.standardError)")
            #expect(second.standardError.contains("TANDEM_DATA_DIR"), "\(second.standardError)")
        }
        #expect(try String(contentsOfFile: data + "/mosquitto.conf", encoding: .utf8) == configuration)
        #expect(!acceptsTCPConnections(port: otherPort))
        #expect(acceptsTCPConnections(port: port))

        first.signal(SIGINT)
        #expect(await first.waitForExit(timeout: .seconds(15)) == 0, "\(first.standardError)")
        #expect(!acceptsTCPConnections(port: port))
    }

    /// The README's failover example: the broker alone, two coordinators beside it on one
    /// PostgreSQL, the leader killed; a person watching `coordinator/status` with
    /// mosquitto_sub sees the standby take over (before, `scripts/run` tied the broker to
    /// the first coordinator, and killing it took the broker down too).
    @Test(.timeLimit(.minutes(3)))
    func theFailoverExampleShowsATakeover() async throws {
        try await withPostgres { postgres in
            let data = try makeTemporaryDirectory(prefix: "run-failover-")
            let (broker, port) = try await startBrokerOnly(data: data)
            defer { broker.signal(SIGKILL) }
            let watcher = try ChildProcess("mosquitto_sub", [
                "-h", "127.0.0.1", "-p", String(port), "-u", "alice", "-P", "alice-demo",
                "-t", "tandem/v1/coordinator/status", "-t", "tandem/v1/coordinator/instances/#", "-v",
            ])
            defer { watcher.signal(SIGKILL) }

            var environment = Self.runEnvironment(data: data, port: port)
            environment["TANDEM_COORDINATOR_BIN"] = Self.coordinator
            environment["TANDEM_DATABASE"] = postgres.url()
            let a = try ChildProcess("/bin/bash", [Self.run, "--coordinator-only", "--instance-id", "a", "--leader-lease-seconds", "1"], environment: environment)
            defer { a.signal(SIGKILL) }
            try await Self.waitFor(in: watcher, #""instance":"a""#, timeout: .seconds(60))
            let b = try ChildProcess("/bin/bash", [Self.run, "--coordinator-only", "--instance-id", "b", "--leader-lease-seconds", "1"], environment: environment)
            defer { b.signal(SIGKILL) }
            try await Self.waitFor(in: watcher, #"instances/b {"online":true"#, timeout: .seconds(60))
            try await Self.waitFor(in: watcher, #""role":"standby""#, timeout: .seconds(30))

            // kill -9 the leader process itself (scripts/run's child), as the README says.
            let pgrep = try await ChildProcess.run("pgrep", ["-P", String(a.pid)])
            let leader = try #require(pgrep.standardOutput.split(separator: "\n").first.flatMap { pid_t($0) })
            kill(leader, SIGKILL)
            #expect(await a.waitForExit(timeout: .seconds(15)) == 137, "\(a.standardError)")

            try await Self.waitFor(in: watcher, #""instance":"b","term":2"#, timeout: .seconds(30))
            #expect(acceptsTCPConnections(port: port), "the broker outlived the leader")
            #expect(b.standardError.contains("leader: took the lease, term 2"), "\(b.standardError)")

            b.signal(SIGTERM)
            #expect(await b.waitForExit(timeout: .seconds(20)) == 0, "\(b.standardError)")
            // Nothing after "online" that reads as a fault: the standby's connection was
            // never lost.
            let afterOnline = b.standardError.components(separatedBy: "online: leading").dropFirst().joined()
            #expect(!afterOnline.contains("connection lost"), "\(b.standardError)")
            broker.signal(SIGINT)
            #expect(await broker.waitForExit(timeout: .seconds(15)) == 0, "\(broker.standardError)")
        }
    }

    // MARK: Helpers

    static func runEnvironment(data: String, port: Int) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["TANDEM_DATA_DIR"] = data
        environment["TANDEM_MQTT_PORT"] = String(port)
        environment.removeValue(forKey: "TANDEM_DATABASE")
        return environment
    }

    /// `scripts/run --broker-only` on a free port, once it accepts connections.
    func startBrokerOnly(data: String) async throws -> (ChildProcess, Int) {
        let port = try freeTCPPort()
        let child = try ChildProcess("/bin/bash", [Self.run, "--broker-only"], environment: Self.runEnvironment(data: data, port: port))
        for _ in 0..<200 where !acceptsTCPConnections(port: port) {
            guard child.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard acceptsTCPConnections(port: port) else {
            throw ChildProcessError.timedOut("scripts/run --broker-only: \(child.standardError)", .seconds(10))
        }
        return (child, port)
    }

    static func waitFor(in child: ChildProcess, _ text: String, timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if child.standardOutput.contains(text) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("no \(text) within \(timeout); saw:\n\(child.standardOutput)")
        throw CancellationError()
    }
}
