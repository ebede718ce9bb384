import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The fixtures the other tests stand on: a child process that really stops on
/// SIGTERM, and a broker that runs the shipped configuration.
@Suite struct BrokerFixtureTests {
    @Test func childProcessStopsOnSIGTERMFromAsyncCode() async throws {
        let child = try ChildProcess("sleep", ["30"])
        #expect(child.isRunning)
        child.signal(SIGTERM)
        let termination = try #require(await child.waitForTermination(timeout: .seconds(5)))
        #expect(termination == .signaled(SIGTERM))
        #expect(!child.isRunning)
    }

    @Test func childProcessReportsExitCodeAndOutput() async throws {
        let result = try await ChildProcess.run("sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(result.exitCode == 3)
        #expect(result.standardOutput == "out\n")
        #expect(result.standardError == "err\n")
    }

    @Test func openBrokerAcceptsConnectionsUntilStopped() async throws {
        let broker = try await MosquittoBroker.start(configuration: .open)
        #expect(acceptsTCPConnections(port: broker.port))
        let publish = try await ChildProcess.run(
            "mosquitto_pub",
            ["-h", broker.host, "-p", "\(broker.port)", "-q", "1", "-t", "anything/at/all", "-m", "hi"])
        #expect(publish.exitCode == 0, "\(publish.standardError)")

        await broker.stop()
        #expect(!broker.isRunning)
        #expect(!acceptsTCPConnections(port: broker.port))
    }

    @Test func shippedBrokerLetsAliceInAndKeepsAnonymousOut() async throws {
        try await withBroker(.shipped) { broker in
            let common = ["-h", broker.host, "-p", "\(broker.port)", "-q", "1", "-m", #"{"online":true}"#]
            let alice = try await ChildProcess.run(
                "mosquitto_pub",
                common + ["-u", "alice", "-P", "alice-demo", "-t", "tandem/v1/presence/alice/phone"])
            #expect(alice.exitCode == 0, "\(alice.standardError)\n\(broker.log)")

            let anonymous = try await ChildProcess.run(
                "mosquitto_pub", common + ["-t", "tandem/v1/presence/alice/phone"])
            #expect(anonymous.exitCode != 0)
            #expect(anonymous.standardError.contains("not authori"), "\(anonymous.standardError)")

            let wrongPassword = try await ChildProcess.run(
                "mosquitto_pub",
                common + ["-u", "alice", "-P", "bob-demo", "-t", "tandem/v1/presence/alice/phone"])
            #expect(wrongPassword.exitCode != 0)
        }
    }

    @Test func retainedMessagesSurviveAGracefulRestart() async throws {
        try await withBroker(.shipped) { broker in
            let target = ["-h", broker.host, "-p", "\(broker.port)", "-u", "coordinator", "-P", "coordinator-demo"]
            let topic = "tandem/v1/coordinator/status"
            let publish = try await ChildProcess.run(
                "mosquitto_pub", target + ["-q", "1", "-r", "-t", topic, "-m", #"{"online":false}"#])
            #expect(publish.exitCode == 0, "\(publish.standardError)")

            let portBefore = broker.port
            try await broker.restart()
            #expect(broker.port == portBefore)

            let read = try await ChildProcess.run(
                "mosquitto_sub", target + ["-t", topic, "-C", "1", "-W", "3"])
            #expect(read.exitCode == 0, "\(read.standardError)\n\(broker.log)")
            #expect(read.standardOutput == "{\"online\":false}\n")
        }
    }
}
