import Foundation
import Testing
import TandemCore
import TestSupport

/// The coordinator binary as an operator runs it: status, will, signals, flags.
@Suite(.serialized) struct CoordinatorProcessTests {
    @Test func goesOnlineDiesWithItsWillAndComesBack() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let watcher = try await TestPeer.connect(broker: broker, user: "watcher", asCoordinatorWatcher: true)
            let status = Topics().coordinatorStatus
            let online = try await watcher.waitFor(status) { $0["online"]?.boolValue == true }
            #expect(online["version"]?.stringValue == "0.1.0")
            #expect(online["startedAt"]?.int64Value != nil)

            await coordinator.kill()  // SIGKILL: only the will can say it
            try await watcher.waitFor(status) { $0 == .obj(["online": false]) }

            try await coordinator.start()
            try await watcher.waitFor(status) { $0["online"]?.boolValue == true }
            #expect(await coordinator.stop() == 0)
            try await watcher.waitFor(status) { $0 == .obj(["online": false]) }
            await watcher.close()
        }
    }

    @Test func publishesMetrics() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let watcher = try await TestPeer.connect(broker: broker, user: "watcher", asCoordinatorWatcher: true)
            let metrics = try await watcher.waitFor(Topics().coordinatorMetrics, timeout: .seconds(12))
            #expect(metrics["uptimeSeconds"] != nil)
            #expect(metrics["messagesIn"]?.int64Value != nil)
            #expect(metrics["receipts"]?["accepted"] != nil)
            #expect(!metrics.text.contains("coordinator-demo"))
            await watcher.close()
            await coordinator.stop()
        }
    }

    @Test func keepsRetryingWhileTheBrokerIsUnreachable() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("unreachable-\(UInt32.random(in: 0...UInt32.max))").path
        let nobody = try RefusingTCPPort()
        defer { withExtendedLifetime(nobody) {} }
        let port = nobody.port
        let child = try ChildProcess(CoordinatorProcess.binary("tandem-coordinator"), ["--port", String(port), "--database", directory + "/t.sqlite"])
        try await Task.sleep(for: .seconds(2))
        #expect(child.isRunning)
        child.signal(SIGTERM)
        #expect(await child.waitForExit(timeout: .seconds(10)) == 0)
        let attempts = child.standardError.components(separatedBy: "\n").filter { $0.contains("connect to 127.0.0.1:\(port) failed") }
        #expect(attempts.count >= 2, "one log line per attempt; got: \(child.standardError)")
    }

    @Test(arguments: [
        (["--port", "http"], "port"),
        (["--port", "70000"], "--port"),
        (["--reorder-window-ms", "-5"], "--reorder-window-ms"),
        (["--lock-lease-seconds", "soon"], "lock-lease-seconds"),
        (["--log-level", "loud"], "--log-level"),
        (["--no-such-flag"], "--no-such-flag"),
        (["--metrics-port", "http"], "metrics-port"),
        (["--metrics-port", "70000"], "--metrics-port"),
        (["--metrics-port", "-1"], "--metrics-port"),
        (["--metrics-host", ""], "--metrics-host"),
        (["--log-format", "xml"], "--log-format"),
        (["--event-log-retention", "a week"], "--event-log-retention"),
        (["--event-log-retention", "-1d"], "--event-log-retention"),
        (["--event-log-retention", "7"], "--event-log-retention"),
    ])
    func aBadFlagIsAUsageError(arguments: [String], named: String) async throws {
        let result = try await ChildProcess.run(CoordinatorProcess.binary("tandem-coordinator"), arguments, timeout: .seconds(20))
        #expect(result.exitCode == 64)
        #expect(result.standardError.contains(named), "stderr: \(result.standardError)")
    }

    @Test func aBadEnvironmentVariableIsAUsageErrorNamingIt() async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["TANDEM_MQTT_PORT"] = "eighteen"
        let result = try await ChildProcess.run(CoordinatorProcess.binary("tandem-coordinator"), [], environment: environment, timeout: .seconds(20))
        #expect(result.exitCode == 64)
        #expect(result.standardError.contains("TANDEM_MQTT_PORT"))
    }

    @Test(arguments: [("TANDEM_METRICS_PORT", "ninety"), ("TANDEM_METRICS_PORT", "65536"), ("TANDEM_LOG_FORMAT", "yaml"),
                      ("TANDEM_EVENT_LOG_RETENTION", "soon")])
    func aBadObservabilityVariableIsAUsageError(variable: String, value: String) async throws {
        var environment = ProcessInfo.processInfo.environment
        environment[variable] = value
        let result = try await ChildProcess.run(CoordinatorProcess.binary("tandem-coordinator"), [], environment: environment, timeout: .seconds(20))
        #expect(result.exitCode == 64)
        #expect(result.standardError.contains(variable) || result.standardError.contains(value), "stderr: \(result.standardError)")
    }

    @Test func aFlagWinsOverItsVariable() async throws {
        try await withBroker(.shipped) { broker in
            // The variable points at a closed port; the flag at the broker.
            var environment = ProcessInfo.processInfo.environment
            environment["TANDEM_MQTT_PORT"] = String(try freeTCPPort())
            environment["TANDEM_MQTT_USERNAME"] = "coordinator"
            environment["TANDEM_MQTT_PASSWORD"] = "coordinator-demo"
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flagwins-\(UInt32.random(in: 0...UInt32.max))").path
            let child = try ChildProcess(
                CoordinatorProcess.binary("tandem-coordinator"), ["--port", String(broker.port), "--database", directory + "/t.sqlite"],
                environment: environment)
            let watcher = try await TestPeer.connect(broker: broker, user: "watcher", asCoordinatorWatcher: true)
            try await watcher.waitFor(Topics().coordinatorStatus) { $0["online"]?.boolValue == true }
            child.signal(SIGTERM)
            #expect(await child.waitForExit(timeout: .seconds(10)) == 0)
            await watcher.close()
        }
    }

    @Test func checkSummarisesTheDatabase() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            await coordinator.stop()
            let result = try await ChildProcess.run(CoordinatorProcess.binary("tandem-coordinator"), ["--check", "--database", coordinator.databasePath])
            #expect(result.exitCode == 0)
            #expect(result.standardOutput.contains("integrity: ok"), "\(result.standardOutput)\(result.standardError)")
            // Issue 14: a readable report, not a Swift struct's dump.
            #expect(!result.standardOutput.contains("StoreSummary("), "\(result.standardOutput)")
            #expect(result.standardOutput.contains("rooms: 0, conversations: 0, workouts: 0"), "\(result.standardOutput)")
            #expect(result.standardOutput.contains("(schema v"), "\(result.standardOutput)")

            let json = try await ChildProcess.run(CoordinatorProcess.binary("tandem-coordinator"), ["--check", "--json", "--database", coordinator.databasePath])
            #expect(json.exitCode == 0)
            let report = try JSON.parse(Array(json.standardOutput.utf8))
            #expect(report["integrity"] == "ok")
            #expect(report["sound"]?.boolValue == true)
            #expect(report["rooms"]?.int64Value == 0)

            // A backup never overwrites, and says so in words.
            let onto = try await ChildProcess.run(CoordinatorProcess.binary("tandem-coordinator"), ["--backup", coordinator.databasePath, "--database", coordinator.databasePath])
            #expect(onto.exitCode == 1)
            #expect(onto.standardError.contains("already exists"), "\(onto.standardError)")
            #expect(!onto.standardError.contains("SQLite error"), "\(onto.standardError)")
        }
    }
}
