import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 10: coordinators on PostgreSQL with a leader lease, standbys that take over.
/// Real broker (the shipped configuration), real PostgreSQL (started by the suite),
/// real `tandem-coordinator` processes. Under continuous load from three clients (room
/// events, DM messages, workout controls; every event resent with its id until it has
/// a receipt, as the agent does), each test breaks something and then checks, with
/// ``verifyLoad``, that every event was answered and processed exactly once and that
/// the retained state equals a replay of the database's event log.
///
/// The lease is 2 s here (5 s by default) to keep the suite short. Waits are bounded
/// (a takeover must happen within the lease plus 8 s, or the test fails); the measured
/// takeover times are printed, never asserted: PERFORMANCE and OPERATIONS have figures.
@Suite(.serialized, .postgres) struct FailoverTests {
    static let leaseSeconds = 2.0
    static let arguments = ["--leader-lease-seconds", "2", "--lock-lease-seconds", "3600"]

    static func freshDatabase() async throws -> String {
        try await PostgresServer.suiteServer().freshDatabase()
    }

    static func stopAll(_ cluster: CoordinatorCluster) async {
        let codes = await cluster.stopAll()
        for (instance, code) in codes {
            // One that is still running: where its threads wait (seen once, after every
            // partition was released, before the process said it stopped).
            let stacks = code == nil ? "\nits threads:\n\(await cluster.stacks(instance).suffix(6000))" : ""
            #expect(code == 0, "\(instance) exited with \(code.map(String.init) ?? "nothing (still running)"):\n\(cluster.currentLog(instance).suffix(2000))\(stacks)")
        }
    }

    /// A fresh database, the shipped broker, `instances` coordinators on them and three
    /// clients under load for `duration`, while `fault` breaks something; then
    /// ``verifyLoad`` against the database's event log. `fault` runs beside the load and
    /// returns a line for the summary.
    static func underLoad(
        room: String, instances: [String] = ["c1", "c2"], duration: Duration = .seconds(12), workouts: Bool = true,
        extraArguments: [String] = [], label: String, _ fault: @escaping @Sendable (CoordinatorCluster, MosquittoBroker) async throws -> String
    ) async throws {
        let url = try await freshDatabase()
        try await withBroker(.shipped) { broker in
            let cluster = try await CoordinatorCluster.start(
                broker: broker, databaseURL: url, instances: instances, arguments: arguments + extraArguments)
            let (peers, plans) = try await CrashRecoveryTests.setUp(
                broker: broker, room: room, seed: UInt64.random(in: 0...UInt64.max), duration: duration, workouts: workouts)
            let breaking = Task { try await fault(cluster, broker) }
            let reports = await CrashRecoveryTests.drive(peers, plans)
            print("FailoverTests: \(try await breaking.value)")
            try await verifyLoad(
                reports: reports, peers: peers, room: room, broker: broker, label: label,
                stop: { await stopAll(cluster) }, eventLog: { try await readEventLog(postgres: url) })
        }
    }

    /// After a pause of `afterMs`, SIGKILLs the leader and waits for another process to
    /// lead: the killed leader, the next, and the milliseconds from the kill to the next
    /// one's online status.
    static func killTheLeader(_ cluster: CoordinatorCluster, afterMs pause: ClosedRange<Int>) async throws -> (CoordinatorCluster.Leader, CoordinatorCluster.Leader, Double) {
        try await Task.sleep(for: .milliseconds(Int.random(in: pause)))
        let leader = try #require(cluster.leader)
        let killedAt = ContinuousClock.now
        await cluster.kill(leader.instance)
        let next = try await cluster.waitForLeader(after: leader.term, timeout: .seconds(Int(leaseSeconds) + 8))
        let took = ContinuousClock.now - killedAt
        #expect(next.instance != leader.instance)
        return (leader, next, Double(took.components.seconds) * 1000 + Double(took.components.attoseconds) / 1e15)
    }

    @Test(.timeLimit(.minutes(3)))
    func aStandbyTakesOverFromAKilledLeaderFiveTimesAndNothingIsLost() async throws {
        try await Self.underLoad(
            room: "failover", instances: ["c1", "c2", "c3"], duration: .seconds(22),
            label: "leader SIGKILLed 5 times, 3 coordinators on PostgreSQL"
        ) { cluster, _ in
            var takeovers: [Double] = []
            for _ in 0..<5 {
                let (leader, next, took) = try await Self.killTheLeader(cluster, afterMs: 600...1_400)
                takeovers.append(took)
                #expect(next.term == leader.term + 1)
                // The killed one comes back as a standby: three processes again.
                try cluster.launch(leader.instance)
            }
            #expect(takeovers.count == 5)
            return "5 SIGKILLs of the leader, takeover (kill to the new leader's online status) \(takeovers.sorted().map { "\(Int($0)) ms" }.joined(separator: ", ")); lease \(Self.leaseSeconds) s"
        }
    }

    /// Issue 21: 4 partitions shared by three processes (at most ceil(4 / 3) = 2 each),
    /// under load, through a SIGKILL of the process leading the room's partition, a
    /// SIGSTOP of another past its lease, a fourth process joining (the others hand it
    /// partitions: drained, published, released) and a PostgreSQL restart. Every event
    /// is answered once and every room, conversation and workout replays from its own
    /// events; each commit is fenced by its partition's term. The room (`failover-q`:
    /// partition 1), the alice-bob conversation (3) and carol's workouts (2) are in
    /// three partitions.
    @Test(.timeLimit(.minutes(3)))
    func fourPartitionsSharedByProcessesSurviveKillFreezeJoinAndRestart() async throws {
        let partitioning = try #require(Partitioning(count: 4))
        let room = "failover-q"
        #expect(Set([partitioning.partition(ofRoom: room), partitioning.partition(ofConversation: "alice", "bob"),
                     partitioning.partition(ofUser: "carol")]).count == 3)
        let server = try PostgresServer.suiteServer()
        try await Self.underLoad(
            room: room, instances: ["c1", "c2", "c3"], duration: .seconds(32), extraArguments: ["--partitions", "4"],
            label: "4 partitions shared by 3-4 processes on PostgreSQL: kill, freeze, join, restart"
        ) { cluster, _ in
            let all = [0, 1, 2, 3]
            /// Every partition led once, by processes other than `excluding`, each within `share`.
            func spread(share: Int, excluding: Set<String> = []) -> Bool {
                let led = cluster.partitionsLed.filter { !excluding.contains($0.key) }
                return led.values.flatMap { $0 }.sorted() == all && led.values.allSatisfy { $0.count <= share }
            }
            func since(_ start: ContinuousClock.Instant) -> Int {
                let took = ContinuousClock.now - start
                return Int(took.components.seconds * 1000 + took.components.attoseconds / 1_000_000_000_000_000)
            }
            var lines: [String] = []
            let wait = Duration.seconds(Int(Self.leaseSeconds) + 8)
            #expect(try await cluster.wait(timeout: .seconds(15)) { spread(share: 2) }, "never spread: \(cluster.partitionsLed)")
            lines.append("spread \(cluster.partitionsLed)")

            // 1. SIGKILL of the room's leader: its partitions are taken within the lease.
            try await Task.sleep(for: .milliseconds(Int.random(in: 1_000...2_000)))
            let before = try #require(cluster.leader)
            let victim = try #require(cluster.partitionsLed.first { $0.value.contains(partitioning.partition(ofRoom: room)) }?.key)
            let killedAt = ContinuousClock.now
            await cluster.kill(victim)
            let next = try await cluster.waitForLeader(after: before.term, timeout: wait)
            #expect(try await cluster.wait(timeout: wait) { spread(share: 4, excluding: [victim]) }, "\(cluster.partitionsLed)")
            lines.append("killed \(victim): online again after \(since(killedAt)) ms (term \(before.term) -> \(next.term)), \(cluster.partitionsLed)")
            try cluster.launch(victim)

            // 2. SIGSTOP past the lease: its partitions go to the others; woken, it says so.
            try await Task.sleep(for: .seconds(1))
            let frozen = try #require(cluster.partitionsLed.keys.sorted().first { $0 != victim })
            let frozenTerm = try #require(cluster.leader).term
            let stoppedAt = ContinuousClock.now
            cluster.signal(frozen, SIGSTOP)
            _ = try await cluster.waitForLeader(after: frozenTerm, timeout: wait)
            let others = try await cluster.wait(timeout: wait) {
                let led = cluster.partitionsLed.filter { $0.key != frozen }
                return led.values.flatMap { $0 }.sorted() == all
            }
            #expect(others, "\(cluster.partitionsLed)")
            lines.append("froze \(frozen): its partitions led by others after \(since(stoppedAt)) ms, \(cluster.partitionsLed.filter { $0.key != frozen })")
            try await Task.sleep(until: stoppedAt + .seconds(2 * Self.leaseSeconds))
            cluster.signal(frozen, SIGCONT)
            #expect(try await cluster.wait(timeout: .seconds(10)) { cluster.currentLog(frozen).contains("lost the lease of partition") },
                    "\(cluster.currentLog(frozen).suffix(3000))")

            // 3. A fourth process joins: share 1 each, the others hand partitions over.
            let joinedAt = ContinuousClock.now
            try cluster.launch("c4")
            #expect(try await cluster.wait(timeout: .seconds(15)) { cluster.partitionsLed["c4"] != nil && spread(share: 1) },
                    "\(cluster.partitionsLed)")
            lines.append("c4 joined: led \(cluster.partitionsLed["c4"] ?? []) after \(since(joinedAt)) ms, \(cluster.partitionsLed)")
            let log = (cluster.instances.map { cluster.log($0) }).joined()
            #expect(log.contains("handed partition"), "no handover logged")

            // Online again once the partitions handed over are ready where they went.
            let restartTerm = try await cluster.waitForLeader(after: 0, timeout: wait).term

            // 4. PostgreSQL restarted: every partition led again, and online.
            try await server.restart()
            try await Task.sleep(for: .seconds(Self.leaseSeconds))
            #expect(try await cluster.wait(timeout: .seconds(15)) { cluster.leader != nil && spread(share: 1) },
                    "\(cluster.partitionsLed) \(cluster.statusHistory.suffix(4).map(\.text))")
            lines.append("PostgreSQL restarted: term \(restartTerm) -> \(cluster.leader?.term ?? 0), \(cluster.partitionsLed)")
            return lines.joined(separator: "; ")
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aFrozenLeaderWakesUpAsAStandbyAndSaysNothingMore() async throws {
        try await Self.underLoad(room: "frozen", label: "leader SIGSTOPped for twice the lease") { cluster, _ in
            try await Task.sleep(for: .seconds(2))
            let frozen = try #require(cluster.leader)
            let stoppedAt = ContinuousClock.now
            cluster.signal(frozen.instance, SIGSTOP)
            let next = try await cluster.waitForLeader(after: frozen.term, timeout: .seconds(Int(Self.leaseSeconds) + 8))
            #expect(next.instance != frozen.instance)
            // Frozen for twice the lease, then woken while the other one leads.
            try await Task.sleep(until: stoppedAt + .seconds(2 * Self.leaseSeconds))
            let statusesBefore = cluster.statusHistory.count
            cluster.signal(frozen.instance, SIGCONT)

            // It says why it stopped, and announces itself as a standby.
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline,
                  !cluster.currentLog(frozen.instance).contains("lost the leader lease of term \(frozen.term)")
                    || cluster.announcement(frozen.instance)?["role"]?.stringValue != "standby" {
                try await Task.sleep(for: .milliseconds(50))
            }
            let log = cluster.currentLog(frozen.instance)
            if !log.contains("lost the leader lease of term \(frozen.term)") {
                Issue.record("\(frozen.instance) never said it lost its lease after SIGCONT; its log:\n\(log.suffix(3000))\nits threads:\n\(await cluster.stacks(frozen.instance))")
            }
            #expect(cluster.announcement(frozen.instance)?["role"]?.stringValue == "standby")
            // Two more seconds: the frozen one published no status, and did not take
            // the shared client id back (the leader's connection was never taken over).
            try await Task.sleep(for: .seconds(2))
            let later = cluster.statusHistory.dropFirst(statusesBefore)
            #expect(!later.contains { $0["instance"]?.stringValue == frozen.instance }, "\(later.map(\.text))")
            #expect(cluster.leader == next)
            let leaderLog = cluster.currentLog(next.instance)
            #expect(!leaderLog.contains("MQTT connection lost"), "\(leaderLog.suffix(2000))")
            return "\(frozen.instance) frozen for \(2 * Self.leaseSeconds) s; \(next.instance) took over with term \(next.term)"
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func restartingPostgreSQLUnderLoadLosesNothingAndAppliesNothingTwice() async throws {
        let server = try PostgresServer.suiteServer()
        try await Self.underLoad(room: "pgrestart", label: "PostgreSQL restarted twice") { cluster, _ in
            let first = try #require(cluster.leader)
            try await Task.sleep(for: .seconds(3))
            try await server.restart()
            try await Task.sleep(for: .seconds(4))
            try await server.restart()
            let last = try await cluster.waitForLeader(after: 0, timeout: .seconds(10))
            return "PostgreSQL restarted twice; leader before \(first.instance) term \(first.term), after \(last.instance) term \(last.term)"
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aBrokerRestartKeepsTheSameLeader() async throws {
        try await Self.underLoad(
            room: "brokerrestart", duration: .seconds(10), workouts: false, label: "broker restarted beside a standby"
        ) { cluster, broker in
            let leader = try #require(cluster.leader)
            let standby = try #require(cluster.instances.first { $0 != leader.instance })
            try await Task.sleep(for: .seconds(3))
            try await broker.restart()
            try await Task.sleep(for: .seconds(Self.leaseSeconds + 1))
            // The same process leads under the same term; the standby stayed one.
            #expect(cluster.leader?.instance == leader.instance)
            #expect(cluster.leader?.term == leader.term)
            #expect(cluster.announcement(standby)?["role"]?.stringValue == "standby")
            #expect(!cluster.log(standby).contains("took the lease"), "\(cluster.log(standby).suffix(2000))")
            return "broker restarted; \(leader.instance) still leads with term \(leader.term)"
        }
    }

    /// Issue 34: a broker down for longer than `--broker-silence-seconds` (3 s) ends the
    /// leader's term (nobody can reach it anyway); once the broker is back, whichever
    /// process hears it first leads, and leadership then stays put: one change, no
    /// back and forth.
    @Test(.timeLimit(.minutes(2)))
    func aBrokerDownLongerThanTheSilenceLimitMovesLeadershipAtMostOnce() async throws {
        try await Self.underLoad(
            room: "brokerdown", duration: .seconds(16), workouts: false, label: "broker down for 5 s (silence limit 3 s)"
        ) { cluster, broker in
            let leader = try #require(cluster.leader)
            try await Task.sleep(for: .seconds(3))
            // Slept as a task: a thread's sleep held one of the two threads of the test
            // run's pool for 5 s (CI: a 200 ms timer of another suite fired 10 s late).
            try await broker.restart { try await Task.sleep(for: .seconds(5)) }
            let next = try await cluster.waitForLeader(after: leader.term, timeout: .seconds(15))
            try await Task.sleep(for: .seconds(6))
            // Settled: the term of the first leader after the outage, and no other since.
            #expect(cluster.leader == next, "\(cluster.statusHistory.suffix(6).map(\.text))")
            let terms = Set(cluster.statusHistory.compactMap { $0["term"]?.int64Value }.filter { $0 > leader.term })
            #expect(terms == [next.term], "terms after the outage: \(terms.sorted())")
            return "broker down 5 s: \(leader.instance) (term \(leader.term)) gave way; \(next.instance) leads with term \(next.term), and nothing moved in the next 6 s"
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func healthzAndMetricsTellTheLeaderFromAStandbyAcrossATakeover() async throws {
        let url = try await Self.freshDatabase()
        try await withBroker(.shipped) { broker in
            let ports = ["c1": try freeTCPPort(), "c2": try freeTCPPort()]
            let cluster = try await CoordinatorCluster.start(
                broker: broker, databaseURL: url, instances: ["c1", "c2"], arguments: Self.arguments,
                perInstance: ports.mapValues { ["--metrics-port", String($0)] })
            let first = try #require(cluster.leader)
            let standby = try #require(cluster.instances.first { $0 != first.instance })

            func health(_ instance: String, saying status: String) async throws -> HTTPResponse {
                let deadline = ContinuousClock.now + .seconds(10)
                while true {
                    if let response = try? httpGet(port: ports[instance]!, path: "/healthz"), response.body.contains("\"status\":\"\(status)\"") {
                        return response
                    }
                    guard ContinuousClock.now < deadline else {
                        let last = (try? httpGet(port: ports[instance]!, path: "/healthz"))?.body ?? "no answer"
                        throw CoordinatorCluster.ClusterError.noLeader(after: 0, logs: "\(instance) /healthz never said \(status): \(last)")
                    }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            let leading = try await health(first.instance, saying: "leader")
            #expect(leading.status == 200)
            #expect(leading.body.contains("\"term\":\(first.term)") && leading.body.contains("\"instance\":\"\(first.instance)\""), "\(leading.body)")
            #expect(try await health(standby, saying: "standby").status == 200)
            let metrics = prometheusSamples(try httpGet(port: ports[first.instance]!, path: "/metrics").body)
            #expect(metrics["tandem_leader"] == 1 && metrics["tandem_leader_term"] == Double(first.term))
            #expect(prometheusSamples(try httpGet(port: ports[standby]!, path: "/metrics").body)["tandem_leader"] == 0)

            await cluster.kill(first.instance)
            let next = try await cluster.waitForLeader(after: first.term, timeout: .seconds(Int(Self.leaseSeconds) + 8))
            #expect(next.instance == standby)
            let took = try await health(standby, saying: "leader")
            #expect(took.body.contains("\"term\":\(next.term)"), "\(took.body)")
            await Self.stopAll(cluster)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aSecondCoordinatorOnTheSameSQLiteFileExitsAtOnce() async throws {
        try await withBroker(.shipped) { broker in
            let first = try await CoordinatorProcess.start(broker: broker)
            let second = try await ChildProcess.run(
                CoordinatorProcess.binary("tandem-coordinator"), first.connectionArguments, timeout: .seconds(20))
            #expect(second.exitCode == 1)
            #expect(second.standardError.contains("another coordinator owns the database \(first.databasePath)"), "\(second.standardError)")
            // The owner never noticed: still online, never kicked off the broker.
            #expect(first.process?.isRunning == true)
            #expect(!first.standardError.contains("MQTT connection lost"))
            #expect(await first.stop() == 0)
        }
    }
}
