import Testing
import TandemCore
@testable import TandemEngine

/// The leader's pipeline with no I/O: inputs in, actions out. Commits that stall,
/// leases lost mid-commit, duplicates during a commit, shutdowns that drain, queries.
@Suite struct LeaderLoopTests {
    static let t0: Millis = 1_800_000_000_000
    static let room = "tandem/v1/rooms/r1/events/alice"

    func loop(leaseUntil: Millis? = nil, _ configure: (inout EngineConfiguration) -> Void = { _ in }) -> LeaderLoop {
        var c = EngineConfiguration()
        c.rateLimitPerSecond = 0
        configure(&c)
        return LeaderLoop(engine: Engine(configuration: c, epoch: "e0", now: Self.t0), leaseDeadline: leaseUntil)
    }

    func at(_ ms: Millis) -> Engine.Now { Engine.Now(Self.t0 + ms) }

    /// e1 created and committed (at 30, done at 31); e2 taken in at 40, in its window.
    func secondEventWaiting() -> LeaderLoop {
        var l = loop()
        _ = l.receive(create("e1", sticker: "s1"), at: at(0))
        _ = l.receive(.tick, at: at(30))
        _ = l.receive(.committed(elapsed: .milliseconds(1)), at: at(31))
        _ = l.receive(create("e2", sticker: "s2", at: 40), at: at(40))
        return l
    }

    func create(_ id: String, sticker: String, at ms: Millis = 0) -> LeaderLoop.Input {
        .message(topic: Self.room, payload: JSON.obj([
            "eventId": .string(id), "type": "create", "stickerId": .string(sticker), "timestamp": .int(Self.t0 + ms),
            "image": "a.png", "frame": .obj(["x": 1, "y": 2, "width": 3, "height": 4]),
        ]).serialized())
    }

    // What the actions say, in a form a test can compare.

    func published(_ actions: [LeaderLoop.Action]) -> [Publication] {
        actions.flatMap { action -> [Publication] in
            if case .publish(let p) = action { return p }
            return []
        }
    }

    func receipts(_ actions: [LeaderLoop.Action]) -> [String] {
        published(actions).filter { $0.topic.hasSuffix("/receipts") }.compactMap {
            guard let json = try? JSON.parse($0.payload), case .string(let id)? = json["id"], case .string(let status)? = json["status"] else { return nil }
            return "\(id) \(status)"
        }
    }

    func commits(_ actions: [LeaderLoop.Action]) -> [LeaderLoop.Commit] {
        actions.compactMap { if case .commit(let c) = $0 { return c } else { return nil } }
    }

    func wakes(_ actions: [LeaderLoop.Action]) -> [Millis] {
        actions.compactMap { if case .wake(let at) = $0 { return at - Self.t0 } else { return nil } }
    }

    func stops(_ actions: [LeaderLoop.Action]) -> [LeaderLoop.Stop] {
        actions.compactMap { if case .stop(let s) = $0 { return s } else { return nil } }
    }

    @Test func anEventIsCommittedThenPublishedNeverBefore() {
        var l = loop()
        let first = l.receive(create("e1", sticker: "s1"), at: at(0))
        #expect(published(first).isEmpty)
        #expect(wakes(first) == [30])
        // The window ends: one commit, nothing published yet.
        let due = l.receive(.tick, at: at(30))
        #expect(commits(due).map { $0.batch.events.count } == [1])
        #expect(published(due).isEmpty)
        #expect(wakes(due).isEmpty)
        // Committed: the step's publications, receipt included.
        let done = l.receive(.committed(elapsed: .milliseconds(4)), at: at(34))
        #expect(receipts(done) == ["e1 accepted"])
        #expect(published(done).contains { $0.topic == "tandem/v1/rooms/r1/state" && $0.retain })
        #expect(l.engine.metrics.batches == 1)
        #expect(l.engine.metrics.commitMillisMax == 4)
    }

    @Test func oneCommitAtATimeAndTheNextTakesEverythingDueByThen() {
        var l = loop()
        _ = l.receive(create("e1", sticker: "s1"), at: at(0))
        #expect(commits(l.receive(.tick, at: at(30))).count == 1)
        // The commit stalls; events keep coming and their windows end.
        for i in 2...50 {
            let actions = l.receive(create("e\(i)", sticker: "s\(i)", at: Millis(i)), at: at(Millis(i) + 30))
            #expect(commits(actions).isEmpty, "a second commit while one is in flight")
            #expect(wakes(actions).isEmpty, "a wake while a commit is in flight would only spin")
        }
        #expect(commits(l.receive(.tick, at: at(500))).isEmpty)
        // When the stalled commit ends, the next batch takes all that is due at once.
        let done = l.receive(.committed(elapsed: .seconds(2)), at: at(2030))
        #expect(receipts(done) == ["e1 accepted"])
        #expect(commits(done).map { $0.batch.events.count } == [49])
        #expect(l.engine.metrics.commitMillisMax == 2000)
        let next = l.receive(.committed(elapsed: .milliseconds(1)), at: at(2031))
        #expect(receipts(next).count == 49)
        #expect(l.engine.metrics.batches == 2)
    }

    @Test func aDuplicateDuringACommitWaitsBehindTheBatchItDescribes() {
        var l = secondEventWaiting()
        #expect(commits(l.receive(.tick, at: at(70))).count == 1)
        // e1 again while e2's batch commits: its answer carries the room's version, which
        // e2's batch moves; it waits for that batch.
        let again = l.receive(create("e1", sticker: "s1"), at: at(71))
        #expect(published(again).isEmpty)
        let done = l.receive(.committed(elapsed: .milliseconds(1)), at: at(72))
        #expect(receipts(done) == ["e2 accepted", "e1 duplicate"])
        // With nothing in flight, a duplicate is answered at once.
        #expect(receipts(l.receive(create("e1", sticker: "s1"), at: at(80))) == ["e1 duplicate"])
    }

    @Test func aLeaseLostMidCommitPublishesNothingMore() {
        var l = loop(leaseUntil: Self.t0 + 5000)
        _ = l.receive(create("e1", sticker: "s1"), at: at(0))
        _ = l.receive(.tick, at: at(30))
        _ = l.receive(create("e2", sticker: "s2"), at: at(31))
        let lost = l.receive(.leaseLost(.takenOver(term: 8, instance: "b")), at: at(40))
        #expect(stops(lost) == [.leaseLost(.takenOver(term: 8, instance: "b"))])
        #expect(published(lost).isEmpty)
        // The commit's end, late, and anything else: nothing.
        #expect(l.receive(.committed(elapsed: .milliseconds(9)), at: at(41)).isEmpty)
        #expect(l.receive(.shutdown, at: at(42)).isEmpty)
        #expect(l.stopped == .leaseLost(.takenOver(term: 8, instance: "b")))
    }

    @Test func aProcessFrozenPastItsLeaseStopsBeforeItPublishes() {
        var l = loop(leaseUntil: Self.t0 + 5000)
        _ = l.receive(create("e1", sticker: "s1"), at: at(0))
        _ = l.receive(.tick, at: at(30))
        // Renewed while the commit runs.
        #expect(l.receive(.leaseRenewed(sentAt: Self.t0 + 990, until: Self.t0 + 6000), at: at(1000)).isEmpty)
        // Frozen for 10 s: the commit's end arrives after the deadline.
        let late = l.receive(.committed(elapsed: .seconds(10)), at: at(10_030))
        #expect(stops(late) == [.leaseLost(.deadlinePassed(byMs: 4030))])
        #expect(published(late).isEmpty)
        #expect(l.receive(.leaseRenewed(sentAt: Self.t0 + 10_031, until: Self.t0 + 20_000), at: at(10_031)).isEmpty)
    }

    @Test func aRenewalSentInTimeCountsEvenTakenInLateButNoneRevivesAnExpiredLease() {
        // Sent before the deadline, taken in after it (the pipeline was busy): it counts.
        var busy = loop(leaseUntil: Self.t0 + 5000)
        #expect(busy.receive(.leaseRenewed(sentAt: Self.t0 + 4990, until: Self.t0 + 9000), at: at(5010)).isEmpty)
        #expect(busy.stopped == nil)
        // Sent after the deadline (the process was frozen past it): the term is over.
        var frozen = loop(leaseUntil: Self.t0 + 5000)
        let actions = frozen.receive(.leaseRenewed(sentAt: Self.t0 + 5001, until: Self.t0 + 9000), at: at(5010))
        #expect(stops(actions) == [.leaseLost(.deadlinePassed(byMs: 10))])
    }

    @Test func anOlderRenewalNeverShortensTheLease() {
        var l = loop(leaseUntil: Self.t0 + 5000)
        _ = l.receive(.leaseRenewed(sentAt: Self.t0 + 100, until: Self.t0 + 9000), at: at(100))
        _ = l.receive(.leaseRenewed(sentAt: Self.t0 + 50, until: Self.t0 + 7000), at: at(200))
        #expect(l.stopped == nil)
        _ = l.receive(create("e1", sticker: "s1"), at: at(8000))
        #expect(l.stopped == nil)
        #expect(stops(l.receive(.tick, at: at(9000))) == [.leaseLost(.deadlinePassed(byMs: 0))])
    }

    @Test func aShutdownDrainsTheCommitInFlightThenTheWindow() {
        var l = loop()
        _ = l.receive(create("e1", sticker: "s1"), at: at(0))
        _ = l.receive(.tick, at: at(30))
        _ = l.receive(create("e2", sticker: "s2", at: 31), at: at(31))
        // e2 is still in its window, e1's batch is committing.
        let shutdown = l.receive(.shutdown, at: at(32))
        #expect(shutdown.isEmpty)
        // Nothing new is taken while draining: it was never answered, so it is resent.
        #expect(l.receive(create("e3", sticker: "s3"), at: at(33)).isEmpty)
        // e1's batch is in: published, and the window is flushed into a last commit.
        let first = l.receive(.committed(elapsed: .milliseconds(1)), at: at(34))
        #expect(receipts(first) == ["e1 accepted"])
        #expect(commits(first).map { $0.batch.events.count } == [1])
        #expect(stops(first).isEmpty)
        let last = l.receive(.committed(elapsed: .milliseconds(1)), at: at(35))
        #expect(receipts(last) == ["e2 accepted"])
        #expect(stops(last) == [.shutdown])
        #expect(l.engine.metrics.messagesIn == 2)
    }

    @Test func aShutdownWithNothingWaitingStopsAtOnce() {
        var l = loop()
        #expect(stops(l.receive(.shutdown, at: at(0))) == [.shutdown])
        #expect(l.receive(create("e1", sticker: "s1"), at: at(1)).isEmpty)
    }

    @Test func aFailedCommitStopsWithNothingOfItPublished() {
        var l = secondEventWaiting()
        _ = l.receive(.tick, at: at(70))
        // A duplicate held behind the failing batch goes down with it.
        #expect(published(l.receive(create("e1", sticker: "s1"), at: at(71))).isEmpty)
        let failed = l.receive(.commitFailed, at: at(72))
        #expect(stops(failed) == [.commitFailed])
        #expect(published(failed).isEmpty)
    }

    @Test func queriesAndOldIdsLeaveThePipelineAndTheirAnswersComeBack() throws {
        var l = loop()
        let q = l.receive(.message(topic: "tandem/v1/users/alice/requests",
                                   payload: JSON.obj(["requestId": "q1", "type": "logbook"]).serialized()), at: at(0))
        let queries = q.compactMap { if case .query(let query) = $0 { return query } else { return nil } }
        #expect(queries.map(\.request.requestId) == ["q1"])
        #expect(published(q).isEmpty)
        _ = l.receive(.queryFailed, at: at(1))
        #expect(l.engine.metrics.errors == 1)
    }

    // What the pipeline used to decide around the loop.

    @Test func theFirstConnectionIsTheTermsOwnAndEveryLaterOneAReconnect() {
        var l = loop()
        let ups = (0..<3).map { n in l.receive(.sessionConnected, at: at(Millis(n))) }
        #expect(ups.map { $0.compactMap { if case .sessionUp(let r) = $0 { return r } else { return nil } } } == [[false], [true], [true]])
        // Draining, a reconnect is still said: the drain's publications need the status online.
        _ = l.receive(create("e1", sticker: "s1"), at: at(5))
        _ = l.receive(.shutdown, at: at(6))
        #expect(l.receive(.sessionConnected, at: at(7)).contains { if case .sessionUp(true) = $0 { return true } else { return false } })
    }

    @Test func accessIsReconciledWithTheEnginesReaders() {
        var l = loop()
        _ = l.receive(create("e1", sticker: "s1"), at: at(0))
        _ = l.receive(.message(topic: Self.room, payload: invitePayload("i1", member: "bob", at: Self.t0 + 1)), at: at(1))
        _ = l.receive(.tick, at: at(31))
        _ = l.receive(.committed(elapsed: .milliseconds(1)), at: at(32))
        let actions = l.receive(.accessMayDiffer, at: at(40))
        let desired = actions.compactMap { if case .reconcileAccess(let d) = $0 { return d } else { return nil } }
        #expect(desired == [["alice": ["r1"], "bob": ["r1"]]])
    }

    @Test func onlyThePublishingPartitionPublishesTheMetrics() {
        func publishes(partition: Int, publisher: Int) -> Bool {
            var l = loop { $0.partition = partition }
            return l.receive(.metricsTick(publisher: publisher), at: at(0)).contains {
                if case .publishMetrics = $0 { return true } else { return false }
            }
        }
        #expect(publishes(partition: 0, publisher: 0))
        #expect(!publishes(partition: 2, publisher: 0))
        // The lower partitions went to another process: this one publishes now.
        #expect(publishes(partition: 2, publisher: 2))
    }

    @Test func aStoppedLoopSaysNothingMore() {
        var l = loop(leaseUntil: Self.t0 + 100)
        _ = l.receive(.leaseLost(.takenOver(term: 2, instance: "c2")), at: at(1))
        #expect(l.receive(.sessionConnected, at: at(2)).isEmpty)
        #expect(l.receive(.accessMayDiffer, at: at(3)).isEmpty)
        #expect(l.receive(.metricsTick(publisher: 0), at: at(4)).isEmpty)
    }
}
