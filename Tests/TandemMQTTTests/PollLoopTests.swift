import Foundation
import Synchronization
import Testing
import TestSupport
@testable import TandemMQTT

/// The loop that runs a consumer's tasks, its timers and its sessions' sockets on one
/// thread, against a real mosquitto.
@Suite(.serialized) struct PollLoopTests {
    func client(_ broker: MosquittoBroker, loop: PollLoop?, id: String = "loop-\(UInt32.random(in: 0...UInt32.max))",
                session: MQTTConfiguration.Session = .cleanStart) throws -> MQTTClient {
        try MQTTClient(configuration: MQTTConfiguration(
            host: broker.host, port: broker.port, clientId: id, session: session, reconnectDelay: 0.1, reconnectDelayMax: 0.3), loop: loop)
    }

    @Test func aTaskThatPrefersTheLoopRunsOnItsThread() async throws {
        let loop = try PollLoop(name: "test-jobs")
        defer { loop.stop() }
        let onLoop = await Task(executorPreference: loop.taskExecutor) { loop.isOnLoopThread }.value
        #expect(onLoop)
        // And after a suspension it comes back to the loop.
        let afterSleep = await Task(executorPreference: loop.taskExecutor) { () -> Bool in
            try? await Task.sleep(for: .milliseconds(5))
            return loop.isOnLoopThread
        }.value
        #expect(afterSleep)
        #expect(!loop.isOnLoopThread)
    }

    /// A task that prefers the loop runs as on no actor: its calls to nonisolated async
    /// functions go on in place instead of each being a job of its own (as they were when
    /// its jobs ran isolated to the loop), and a call to an actor on the loop goes there
    /// and comes back to the loop's thread.
    @Test func aTaskOnTheLoopCallsAsyncFunctionsWithoutHopping() async throws {
        let loop = try PollLoop(name: "test-hops")
        defer { loop.stop() }
        let counter = LoopCounter(loop: loop)
        let before = loop.jobsRun.load(ordering: .relaxed)
        let (sum, onLoop) = await Task(executorPreference: loop.taskExecutor) { () -> (Int, Bool) in
            var sum = 0
            var onLoop = true
            for i in 0..<1000 {
                sum += await Self.plain(i)
                if !loop.isOnLoopThread { onLoop = false }
            }
            for _ in 0..<10 { await counter.add() }
            return (sum, onLoop && loop.isOnLoopThread)
        }.value
        #expect(sum == 499_500)
        #expect(onLoop)
        #expect(await counter.value == 10)
        #expect(await counter.allOnLoop)
        // The task's start and end, and there and back for each of the ten actor calls:
        // some twenty jobs, not a thousand more.
        let jobs = loop.jobsRun.load(ordering: .relaxed) - before
        #expect(jobs < 100, "the task took \(jobs) jobs")
    }

    nonisolated static func plain(_ i: Int) async -> Int { i }

    @Test func anActorOnTheLoopRunsOnItsThread() async throws {
        let loop = try PollLoop(name: "test-actor")
        defer { loop.stop() }
        let counter = LoopCounter(loop: loop)
        for _ in 0..<100 { await counter.add() }
        #expect(await counter.value == 100)
        #expect(await counter.allOnLoop)
    }

    @Test func timersFireInOrderOnTheLoopThreadNoEarlierThanAsked() async throws {
        let loop = try PollLoop(name: "test-timers")
        defer { loop.stop() }
        let fired = Mutex<[(Int, Bool, ContinuousClock.Instant)]>([])
        let start = ContinuousClock.now
        let (done, finish) = AsyncStream.makeStream(of: Void.self)
        for (i, ms) in [30, 10, 20].enumerated() {
            loop.schedule(at: start + .milliseconds(ms)) {
                let count = fired.withLock { f -> Int in
                    f.append((i, loop.isOnLoopThread, ContinuousClock.now))
                    return f.count
                }
                if count == 3 { finish.finish() }
            }
        }
        for await _ in done {}
        let seen = fired.withLock { $0 }
        #expect(seen.map(\.0) == [1, 2, 0])
        #expect(seen.allSatisfy { $0.1 })
        for (i, _, at) in seen { #expect(at - start >= .milliseconds([30, 10, 20][i])) }
    }

    @Test func clientsOnOneLoopTalkToEachOtherWithCallbacksOnItsThread() async throws {
        try await withBroker(.open) { broker in
            let loop = try PollLoop(name: "test-clients")
            defer { loop.stop() }
            let a = try client(broker, loop: loop)
            let b = try client(broker, loop: loop)
            try await a.connect()
            try await b.connect()
            let received = Mutex<[(String, Bool)]>([])
            let (arrived, feed) = AsyncStream.makeStream(of: Int.self)
            try await a.subscribe(["loop/#"], qos: .atLeastOnce) { message in
                let n = received.withLock { r -> Int in
                    r.append((message.payloadString, loop.isOnLoopThread))
                    return r.count
                }
                feed.yield(n)
            }
            for i in 0..<200 { try b.enqueue("loop/\(i)", payload: Array("m\(i)".utf8), qos: .atLeastOnce) }
            try await b.publish("loop/last", payload: Array("last".utf8))
            for await n in arrived where n == 201 { break }
            let seen = received.withLock { $0 }
            #expect(seen.map(\.0) == (0..<200).map { "m\($0)" } + ["last"])
            #expect(seen.allSatisfy { $0.1 })
            await a.disconnect()
            await b.disconnect()
        }
    }

    /// Thousands of small messages at once to a client on a loop, QoS 0 (one packet taken
    /// a call): all arrive, in order. It can catch bytes left in the read buffer
    /// (`CMosquittoReads`), for which no wake would come, when a burst leaves some there.
    @Test(.timeLimit(.minutes(1)))
    func aBurstOfSmallMessagesToALoopArrivesWhole() async throws {
        try await withBroker(.open) { broker in
            let loop = try PollLoop(name: "test-burst")
            defer { loop.stop() }
            let a = try client(broker, loop: loop)
            let b = try client(broker, loop: nil)
            try await a.connect()
            try await b.connect()
            let count = 6000
            let received = Mutex<[String]>([])
            let (arrived, feed) = AsyncStream.makeStream(of: Int.self)
            try await a.subscribe(["burst/#"], qos: .atMostOnce) { message in
                feed.yield(received.withLock { r in
                    r.append(message.payloadString)
                    return r.count
                })
            }
            for i in 0..<count { try b.enqueue("burst/x", payload: Array("\(i)".utf8), qos: .atMostOnce) }
            for await n in arrived where n == count { break }
            #expect(received.withLock { $0 } == (0..<count).map { "\($0)" })
            await a.disconnect()
            await b.disconnect()
        }
    }

    @Test func aClientOnALoopReconnectsAfterTheBrokerRestarts() async throws {
        try await withBroker(.open) { broker in
            let loop = try PollLoop(name: "test-reconnect")
            defer { loop.stop() }
            try await expectBackAfterABrokerRestart(try client(broker, loop: loop, session: .persistent(expirySeconds: 600)), broker: broker)
        }
    }

    @Test func aClientOnALoopCutOffStopsAtOnceAndItsWillIsPublished() async throws {
        try await withBroker(.open) { broker in
            let loop = try PollLoop(name: "test-cut")
            defer { loop.stop() }
            let watcher = try client(broker, loop: nil)
            try await watcher.connect()
            let wills = try await watcher.subscribe("will/#")
            let c = try MQTTClient(configuration: MQTTConfiguration(
                host: broker.host, port: broker.port, clientId: "cut-\(UInt32.random(in: 0...UInt32.max))",
                will: MQTTWill(topic: "will/c", payload: Array("gone".utf8), qos: .atLeastOnce, retain: false)), loop: loop)
            try await c.connect()
            c.cutOff(reason: "test")
            #expect(try await first(of: wills)?.payloadString == "gone")
            #expect(throws: MQTTError.self) { try c.enqueue("x/1", payload: [1]) }
            await c.disconnect()
            await watcher.disconnect()
        }
    }
}

extension PollLoopTests {
    /// A loop stopped before its client attaches: the client is told its connection is
    /// lost (not left waiting for a loop that will never drive it), and disconnects.
    @Test(.timeLimit(.minutes(1))) func aClientOfAStoppedLoopIsRefusedAndStillDisconnects() async throws {
        try await withBroker(.open) { broker in
            let loop = try PollLoop(name: "test-stopped")
            loop.stop()
            await Task.detached { loop.waitUntilStopped() }.value
            let c = try client(broker, loop: loop)
            let connecting = Task { try await c.connect() }
            try await Task.sleep(for: .milliseconds(300))
            #expect(!c.isConnected)
            await c.disconnect()
            await #expect(throws: (any Error).self) { try await connecting.value }
        }
    }

    /// A job that keeps enqueueing jobs does not keep the loop from its sockets.
    @Test(.timeLimit(.minutes(1))) func endlessJobsLeaveTheSocketsTheirTurn() async throws {
        try await withBroker(.open) { broker in
            let loop = try PollLoop(name: "test-busy")
            defer { loop.stop() }
            let a = try client(broker, loop: loop)
            try await a.connect()
            let spinning = Task(executorPreference: loop.taskExecutor) {
                while !Task.isCancelled { await Task.yield() }
            }
            let b = try client(broker, loop: nil)
            try await b.connect()
            let subscription = try await b.subscribe("busy/#")
            try await a.publish("busy/1", payload: Array("through".utf8))
            #expect(try await first(of: subscription)?.payloadString == "through")
            spinning.cancel()
            await a.disconnect()
            await b.disconnect()
        }
    }
}

actor LoopCounter {
    let loop: PollLoop
    var value = 0
    var allOnLoop = true
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    init(loop: PollLoop) { self.loop = loop }

    func add() {
        value += 1
        if !loop.isOnLoopThread { allOnLoop = false }
    }
}

/// `c` (a persistent session, not yet connected) subscribes and connects; the broker
/// stops and starts again; `c` says it is connected again and gets what another client
/// publishes then, under its old subscription. Then both disconnect.
func expectBackAfterABrokerRestart(_ c: MQTTClient, broker: MosquittoBroker) async throws {
    let subscription = try await c.subscribe("back/#")
    try await c.connect()
    var events = c.events.makeAsyncIterator()
    _ = await events.next()  // connected
    await broker.stopGracefully()
    while let event = await events.next() {
        if case .disconnected = event { break }
    }
    try await broker.restart()
    while let event = await events.next() {
        if case .connected = event { break }
    }
    let other = try MQTTClient(configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientId: "other-\(UInt32.random(in: 0...UInt32.max))"))
    try await other.connect()
    try await other.publish("back/1", payload: Array("again".utf8))
    #expect(try await first(of: subscription)?.payloadString == "again")
    await other.disconnect()
    await c.disconnect()
}
