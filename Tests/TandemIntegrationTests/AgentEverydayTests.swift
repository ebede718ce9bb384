import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 14: the agent as a new user meets it, driven as the real binary.
@Suite struct AgentEverydayTests {
    static let agent = CoordinatorProcess.binary("tandem-agent")

    @Test(.timeLimit(.minutes(1)))
    func aScriptWithNoBrokerGivesUpWithOneLine() async throws {
        let nobody = try RefusingTCPPort()
        defer { withExtendedLifetime(nobody) {} }
        let port = nobody.port
        let input = try Agent.inputFile(["create q1 a.png 1 1 1 1"])
        let room = try ChildProcess(Self.agent, ["room", "--room", "r", "--user", "alice", "--port", String(port), "--connect-timeout", "2"], standardInput: input)
        #expect(await room.waitForExit(timeout: .seconds(30)) == 1)
        #expect(room.standardError.contains("cannot reach the broker at 127.0.0.1:\(port): "), "\(room.standardError)")
        #expect(room.standardError.contains("Connection refused"), "\(room.standardError)")

        // A one-shot command gives up too.
        let logbook = try await ChildProcess.run(Self.agent, ["logbook", "--user", "alice", "--port", String(port), "--connect-timeout", "2"], timeout: .seconds(30))
        #expect(logbook.exitCode == 1)
        #expect(logbook.standardError.contains("cannot reach the broker"), "\(logbook.standardError)")
    }

    @Test(.timeLimit(.minutes(1)))
    func aPortThatIsNotMQTTIsNamedAsSuch() async throws {
        // A TCP listener that accepts and never speaks MQTT.
        let port = try freeTCPPort()
        let listener = try ChildProcess("/usr/bin/env", ["python3", "-c", """
            import socket, time
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", \(port))); s.listen(8)
            held = []
            end = time.time() + 40
            s.settimeout(1)
            while time.time() < end:
                try: held.append(s.accept()[0])
                except socket.timeout: pass
            """])
        defer { listener.signal(SIGKILL) }
        try await Task.sleep(for: .milliseconds(500))
        let logbook = try await ChildProcess.run(Self.agent, ["logbook", "--user", "alice", "--port", String(port), "--connect-timeout", "2"], timeout: .seconds(30))
        #expect(logbook.exitCode == 1)
        #expect(logbook.standardError.contains("cannot reach the broker at 127.0.0.1:\(port)"), "\(logbook.standardError)")
        #expect(logbook.standardError.contains("is that port an MQTT broker"), "\(logbook.standardError)")
    }

    @Test(.timeLimit(.minutes(2)))
    func aTypoInAScriptExits64AndItsPresenceIsGoneAfterwards() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let input = try Agent.inputFile(["mvoe c1 1 1", "create c1 a.png 1 1 10 10"])
            let run = try await Agent(broker: broker, user: "alice").run(["room", "--room", "typo"], json: false, standardInput: input)
            #expect(run.termination?.code == 64, "\(run.standardError)")
            #expect(run.standardError.contains("mvoe"), "\(run.standardError)")

            // No retained presence is left behind by a clean exit.
            let retained = try await ChildProcess.run("mosquitto_sub", broker.arguments(user: "alice") + [
                "-t", "tandem/v1/presence/alice/#", "-v", "-W", "2",
            ])
            #expect(!retained.standardOutput.contains("agent-alice"), "\(retained.standardOutput)")
            #expect(await coordinator.stop() == 0)
        }
    }

    @Test func cliRoughEdgesAreGone() async throws {
        let unknown = try await ChildProcess.run(Self.agent, ["romo", "--room", "x"])
        #expect(unknown.exitCode == 64)
        #expect(unknown.standardError.contains("unknown subcommand 'romo'"), "\(unknown.standardError)")

        let version = try await ChildProcess.run(Self.agent, ["--version"])
        #expect(version.exitCode == 0)
        #expect(version.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == TandemVersion.current)

        let historyHelp = try await ChildProcess.run(Self.agent, ["dm", "history", "--help"])
        #expect(historyHelp.standardOutput.contains("history"), "\(historyHelp.standardOutput)")
        #expect(!historyHelp.standardOutput.contains("take commands on stdin"), "\(historyHelp.standardOutput)")

        let negative = try await ChildProcess.run(Self.agent, ["workout", "--device", "watch", "--start-origin", "local", "--workout", "w", "--user", "alice", "--duration", "-3"])
        #expect(negative.exitCode == 64)
        #expect(negative.standardError.contains("-3.0 must be a positive number"), "\(negative.standardError)")

        let gpx = try await ChildProcess.run(Self.agent, ["workout", "--device", "watch", "--start-origin", "local", "--workout", "w", "--user", "alice", "--route", "/nonexistent/track.gpx"])
        #expect(gpx.exitCode == 1)
        #expect(gpx.standardError.contains("cannot read the route /nonexistent/track.gpx: no such file"), "\(gpx.standardError)")
        #expect(!gpx.standardError.contains("NSCocoaErrorDomain"))
    }

    /// Item 4: one line per event that matters, one redraw per change. Alice creates a
    /// sticker and keeps her session open; her lock runs out (a 1 s lease), then the
    /// coordinator stops: each gets one line, and no version of the room is drawn twice.
    @Test(.timeLimit(.minutes(2)))
    func aLockExpiringAndTheCoordinatorLeavingAreSaidOnceEach() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--lock-lease-seconds", "1"])
            let agent = Agent(broker: broker, user: "alice")
            let watcher = try await TestPeer.connect(broker: broker, user: "alice")
            // Stdin stays open until the test says so (the file `done`): what happens is
            // waited for, not timed, so a busy machine changes nothing.
            let done = try makeTemporaryDirectory(prefix: "said-") + "/done"
            let script = "(printf 'create s1 a.png 1 1 10 10\\n'; while [ ! -e '\(done)' ]; do sleep 0.1; done) | \(Self.agent) room --room said "
                + agent.connection.joined(separator: " ")
            let child = try ChildProcess("/bin/sh", ["-c", script])
            // The lock runs out a second after the create: version 2 says so.
            _ = try await watcher.waitFor(Topics().roomState(room: "said"), timeout: .seconds(60)) { $0["version"]?.int64Value == 2 }
            await watcher.close()
            #expect(await coordinator.stop() == 0)
            try await Self.waitUntil(timeout: .seconds(60)) { child.standardOutput.contains("the coordinator is offline") }
            _ = FileManager.default.createFile(atPath: done, contents: nil)
            #expect(await child.waitForExit(timeout: .seconds(60)) == 0, "\(child.standardError)")
            let out = child.standardOutput
            #expect(out.components(separatedBy: "your lock on s1 expired").count == 2, "\(out)")
            #expect(out.components(separatedBy: "the coordinator is offline").count == 2, "\(out)")
            let headers = out.split(separator: "\n").filter { $0.hasPrefix("room said · version") }
            #expect(Set(headers).count == headers.count, "a version drawn twice: \(headers)")
            #expect(headers.contains { $0.hasPrefix("room said · version 1 ") }, "\(headers)")
            #expect(headers.contains { $0.hasPrefix("room said · version 2 ") }, "\(headers)")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func yourOwnReadSaysItWasDone() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let input = try Agent.inputFile(["request bob hello", "read bob"])
            let run = try await Agent(broker: broker, user: "alice").run(["dm"], json: false, standardInput: input)
            #expect(run.termination?.code == 0, "\(run.standardError)")
            #expect(run.standardOutput.contains("read bob: done"), "\(run.standardOutput)")
            #expect(await coordinator.stop() == 0)
        }
    }

    /// Polls `condition` every 50 ms until it holds, at most `timeout`.
    static func waitUntil(timeout: Duration, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("the awaited state did not come within \(timeout)")
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
