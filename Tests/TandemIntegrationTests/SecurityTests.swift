import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 12: TLS end to end with certificates from scripts/make-certs, against a real
/// mosquitto with the shipped configuration plus its TLS listener; the password file.
@Suite struct SecurityTests {
    static let agent = CoordinatorProcess.binary("tandem-agent")
    static let coordinator = CoordinatorProcess.binary("tandem-coordinator")

    @Test(.timeLimit(.minutes(2)))
    func theCoordinatorAndAnAgentTalkOverTLS() async throws {
        let certs = try await makeCertificates()
        try await withBroker(.shipped, certificates: certs) { broker in
            let tlsPort = try #require(broker.tlsPort)
            // Host name verification is on: "localhost" is in the certificate.
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: [
                "--host", "localhost", "--port", String(tlsPort), "--tls-ca-file", certs + "/ca.crt",
                "--tls-cert-file", certs + "/client.crt", "--tls-key-file", certs + "/client.key",
            ])
            #expect(coordinator.standardError.contains("over TLS"))

            let input = try writeTemporaryFile(["create s1 a.png 1 1 10 10"].joined(separator: "\n") + "\n")
            let agent = try ChildProcess(Self.agent, [
                "room", "--room", "tls-room", "--host", "localhost", "--port", String(tlsPort),
                "--username", "alice", "--password", "alice-demo", "--tls-ca-file", certs + "/ca.crt", "--json",
            ], standardInput: input)
            #expect(await agent.waitForExit(timeout: .seconds(60)) == 0, "\(agent.standardError)")
            #expect(agent.standardOutput.contains("\"accepted\""), "\(agent.standardOutput)")

            // The state is there for a TLS subscriber (mosquitto_sub with the same CA; the
            // coordinator account, which reads every room: bob is no member of this one).
            let sub = try await ChildProcess.run("/usr/bin/mosquitto_sub", [
                "-h", "localhost", "-p", String(tlsPort), "--cafile", certs + "/ca.crt",
                "-u", "coordinator", "-P", "coordinator-demo", "-t", "tandem/v1/rooms/tls-room/state", "-C", "1", "-W", "10",
            ])
            #expect(sub.exitCode == 0, "\(sub.standardError)")
            #expect(sub.standardOutput.contains("\"s1\""))
            #expect(await coordinator.stop() == 0)
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aBrokerCertificateFromAnotherCAIsRefusedWithAReadableError() async throws {
        let certs = try await makeCertificates()
        let other = try await makeCertificates()
        try await withBroker(.shipped, certificates: certs) { broker in
            let tlsPort = try #require(broker.tlsPort)
            let run = try await ChildProcess.run(Self.coordinator, [
                "--host", "localhost", "--port", String(tlsPort), "--username", "coordinator", "--password", "coordinator-demo",
                "--tls-ca-file", other + "/ca.crt", "--database", try makeTemporaryDirectory(prefix: "db-") + "/t.sqlite",
            ], timeout: .seconds(60))
            #expect(run.exitCode == 1)
            #expect(run.standardError.contains("TLS handshake with localhost:\(tlsPort) failed"), "\(run.standardError)")
            #expect(run.standardError.contains("certificate verify failed"), "\(run.standardError)")

            // The agent says the same and exits 1 rather than retrying forever.
            let agent = try await ChildProcess.run(Self.agent, [
                "logbook", "--host", "localhost", "--port", String(tlsPort), "--username", "alice", "--password", "alice-demo",
                "--tls-ca-file", other + "/ca.crt",
            ], timeout: .seconds(60))
            #expect(agent.exitCode == 1)
            #expect(agent.standardError.contains("TLS handshake"), "\(agent.standardError)")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aPlainClientIsRefusedOnTheTLSPort() async throws {
        let certs = try await makeCertificates()
        try await withBroker(.shipped, certificates: certs) { broker in
            let tlsPort = try #require(broker.tlsPort)
            let plain = try await ChildProcess.run("/usr/bin/mosquitto_pub", [
                "-h", "127.0.0.1", "-p", String(tlsPort), "-u", "alice", "-P", "alice-demo",
                "-t", "tandem/v1/presence/alice/plain", "-m", #"{"online":true}"#,
            ], timeout: .seconds(30))
            #expect(plain.exitCode != 0)
            // The same client with the CA gets through.
            let secure = try await ChildProcess.run("/usr/bin/mosquitto_pub", [
                "-h", "localhost", "-p", String(tlsPort), "--cafile", certs + "/ca.crt", "-u", "alice", "-P", "alice-demo",
                "-t", "tandem/v1/presence/alice/plain", "-m", #"{"online":true}"#,
            ], timeout: .seconds(30))
            #expect(secure.exitCode == 0, "\(secure.standardError)")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func thePasswordComesFromAFileAndNeverReachesTheLog() async throws {
        let file = try writeTemporaryFile("coordinator-demo\n")
        try await withBroker(.shipped) { broker in
            // Debug logging (CoordinatorProcess sets it): still no password in any line.
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--password-file", file])
            #expect(await coordinator.stop() == 0)
            #expect(!coordinator.standardError.contains("coordinator-demo"))
            #expect(coordinator.standardError.contains("online"))
        }
    }

    /// Issue 18: the README's `--password-file <(echo ...)` gave "the password file
    /// /dev/fd/63 is empty": the file was read twice, once to validate and once to use.
    /// A secret is read once: both password files as a shell's process substitutions.
    @Test(.timeLimit(.minutes(1)))
    func passwordFilesMayBePipesReadOnce() async throws {
        try await withBroker(.shipped) { broker in
            let binary = CoordinatorProcess.binary("tandem-coordinator")
            let directory = try makeTemporaryDirectory(prefix: "pipes-")
            let script = "exec '\(binary)' --host \(broker.host) --port \(broker.port) --database '\(directory)/t.sqlite' "
                + "--username coordinator --password-file <(printf 'coordinator-demo\\n') "
                + "--broker-admin-username coordinator-admin --broker-admin-password-file <(printf 'coordinator-admin-demo\\n')"
            let child = try ChildProcess("/bin/bash", ["-c", script], standardOutput: directory + "/out", standardError: directory + "/err")
            let watcher = try await TestPeer.connect(broker: broker, user: "watcher", asCoordinatorWatcher: true)
            let status = try await watcher.waitFor(Topics().coordinatorStatus, timeout: .seconds(20)) { $0["online"]?.boolValue == true }
            #expect(status["online"] == true)
            child.signal(SIGTERM)
            #expect(await child.waitForExit(timeout: .seconds(15)) == 0, "\(child.standardError)")
            #expect(!child.standardError.contains("empty"), "\(child.standardError)")
            await watcher.close()
        }
    }

    @Test(arguments: ["tandem-coordinator", "tandem-agent"])
    func bothPasswordFlagsAreAUsageError(_ binary: String) async throws {
        let file = try writeTemporaryFile("secret\n")
        let arguments = (binary == "tandem-agent" ? ["logbook", "--user", "alice"] : []) + ["--password", "x", "--password-file", file]
        let run = try await ChildProcess.run(CoordinatorProcess.binary(binary), arguments)
        #expect(run.exitCode == 64)
        #expect(run.standardError.contains("--password and --password-file"), "\(run.standardError)")
    }

    func writeTemporaryFile(_ text: String) throws -> String {
        let path = try makeTemporaryDirectory(prefix: "input-") + "/file"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
