import Foundation
import Synchronization
import Testing
import TestSupport
@testable import TandemMQTT

/// Clients with no thread of their own: a ``PollLoop`` drives their sockets and an
/// ``MQTTConnector`` connects and reconnects them, against a real mosquitto.
@Suite(.serialized) struct MQTTConnectorTests {
    func client(_ broker: MosquittoBroker, loop: PollLoop, connector: MQTTConnector, id: String = "pooled-\(UInt32.random(in: 0...UInt32.max))",
                session: MQTTConfiguration.Session = .cleanStart) throws -> MQTTClient {
        try MQTTClient(
            configuration: MQTTConfiguration(
                host: broker.host, port: broker.port, clientId: id, session: session, reconnectDelay: 0.1, reconnectDelayMax: 0.3),
            loop: loop, connector: connector)
    }

    /// The process's threads, as /proc says.
    static func threads() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Threads:") }
        return Int(line?.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
    }

    /// Two hundred sessions connect, each gets what another publishes to it, and the
    /// process's threads do not grow with them (a thread each would add two hundred;
    /// the other suites running beside this one start and end threads of their own, a
    /// score or so, so the bound is half the sessions).
    @Test(.timeLimit(.minutes(2))) func twoHundredSessionsShareTheLoopsThreads() async throws {
        try await withBroker(.open) { broker in
            let loop = try PollLoop(name: "test-many")
            let connector = MQTTConnector(name: "test-connect", threads: 2)
            defer {
                loop.stop()
                connector.stop()
            }
            let before = Self.threads()
            let clients = try (0..<200).map { i in try client(broker, loop: loop, connector: connector, id: "many-\(i)") }
            let subscriptions = try await withThrowingTaskGroup(of: (Int, MQTTSubscription).self) { group in
                for (i, c) in clients.enumerated() {
                    group.addTask {
                        let subscription = try await c.subscribe("many/\(i)")
                        try await c.connect()
                        return (i, subscription)
                    }
                }
                var all: [Int: MQTTSubscription] = [:]
                for try await (i, subscription) in group { all[i] = subscription }
                return all
            }
            let during = Self.threads()
            print("threads: \(before) before, \(during) with 200 sessions connected")
            #expect(during - before < 100)
            for (i, c) in clients.enumerated() {
                try c.enqueue("many/\((i + 1) % clients.count)", payload: Array("to \((i + 1) % clients.count)".utf8))
            }
            for (i, subscription) in subscriptions {
                #expect(try await first(of: subscription)?.payloadString == "to \(i)")
            }
            for c in clients { await c.disconnect() }
            #expect(clients.allSatisfy { !$0.isConnected })
        }
    }

    /// A pooled session whose broker goes away waits in the connector's timers (no
    /// thread), and is back, with its persistent session, when the broker is.
    @Test(.timeLimit(.minutes(1))) func aPooledSessionReconnectsAfterTheBrokerRestarts() async throws {
        try await withBroker(.open) { broker in
            let loop = try PollLoop(name: "test-pooled-reconnect")
            let connector = MQTTConnector(name: "test-connect", threads: 1)
            defer {
                loop.stop()
                connector.stop()
            }
            try await expectBackAfterABrokerRestart(
                try client(broker, loop: loop, connector: connector, session: .persistent(expirySeconds: 600)), broker: broker)
        }
    }

    /// A pooled session that cannot reach its broker keeps retrying in the timers, and a
    /// disconnect then ends it at once (the waiting connect fails), not at the next retry.
    @Test(.timeLimit(.minutes(1))) func aPooledSessionWithoutABrokerStopsWhenAsked() async throws {
        let loop = try PollLoop(name: "test-pooled-unreachable")
        let connector = MQTTConnector(name: "test-connect", threads: 1)
        defer {
            loop.stop()
            connector.stop()
        }
        let c = try MQTTClient(
            configuration: MQTTConfiguration(host: "127.0.0.1", port: 1, clientId: "nowhere", reconnectDelay: 30, reconnectDelayMax: 30),
            loop: loop, connector: connector)
        let connecting = Task { try await c.connect() }
        var events = c.events.makeAsyncIterator()
        let first = await events.next()
        guard case .disconnected(let reason)? = first else {
            Issue.record("expected a failed attempt first, got \(String(describing: first))")
            return
        }
        #expect(reason.contains("refused"))
        let started = ContinuousClock.now
        await c.disconnect()
        print("disconnect of a session waiting 30 s to retry took \(ContinuousClock.now - started)")
        await #expect(throws: (any Error).self) { try await connecting.value }
        #expect(c.lastProblem != nil)
    }

    /// Bad credentials through the connector fail the connect for good, as on a thread
    /// of the client's own.
    @Test(.timeLimit(.minutes(1))) func badCredentialsThroughTheConnectorAreRefused() async throws {
        try await withBroker(.shipped) { broker in
            let loop = try PollLoop(name: "test-pooled-refused")
            let connector = MQTTConnector(name: "test-connect", threads: 1)
            defer {
                loop.stop()
                connector.stop()
            }
            let c = try MQTTClient(
                configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientId: "refused", username: "alice", password: "wrong"),
                loop: loop, connector: connector)
            let error = await #expect(throws: MQTTError.self) { try await c.connect() }
            if case .connectionRefused = error?.kind {} else { Issue.record("expected a refusal, got \(String(describing: error))") }
            await c.disconnect()
        }
    }
}
