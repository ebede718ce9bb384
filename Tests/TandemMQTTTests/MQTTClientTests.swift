import Foundation
import Testing
import TestSupport
@testable import TandemMQTT

/// The client against a real mosquitto started on a free loopback port.
@Suite(.serialized) struct MQTTClientTests {
    func client(_ broker: MosquittoBroker, id: String = "t-\(UInt32.random(in: 0...UInt32.max))", username: String? = nil, password: String? = nil, session: MQTTConfiguration.Session = .cleanStart, will: MQTTWill? = nil) throws -> MQTTClient {
        try MQTTClient(configuration: MQTTConfiguration(
            host: broker.host, port: broker.port, clientId: id, username: username, password: password,
            will: will, session: session, reconnectDelay: 0.1, reconnectDelayMax: 0.5))
    }

    @Test func roundTrip() async throws {
        try await withBroker(.open) { broker in
            let a = try client(broker)
            let b = try client(broker)
            try await a.connect()
            try await b.connect()
            let subscription = try await a.subscribe("rt/#")
            try await b.publish("rt/one", payload: Array("hello".utf8), qos: .atLeastOnce)
            let message = try #require(try await first(of: subscription))
            #expect(message.topic == "rt/one")
            #expect(message.payloadString == "hello")
            #expect(message.qos == .atLeastOnce)
            #expect(message.retain == false)
            await a.disconnect()
            await b.disconnect()
        }
    }

    @Test func retainedMessageReachesALateSubscriber() async throws {
        try await withBroker(.open) { broker in
            let publisher = try client(broker)
            try await publisher.connect()
            try await publisher.publish("state/room", payload: Array("v1".utf8), retain: true)
            let late = try client(broker)
            try await late.connect()
            let subscription = try await late.subscribe("state/#")
            let message = try #require(try await first(of: subscription))
            #expect(message.payloadString == "v1")
            #expect(message.retain)
            await publisher.disconnect()
            await late.disconnect()
        }
    }

    @Test func persistentSessionReceivesWhatWasPublishedWhileAway() async throws {
        try await withBroker(.open) { broker in
            let id = "persistent-\(UInt32.random(in: 0...UInt32.max))"
            let first = try client(broker, id: id, session: .persistent(expirySeconds: 3600))
            let firstSubscription = try await first.subscribe("queue/#")
            try await first.connect()
            await first.disconnect()
            _ = firstSubscription

            let publisher = try client(broker)
            try await publisher.connect()
            for i in 0..<5 { try await publisher.publish("queue/\(i)", payload: Array("m\(i)".utf8)) }

            // A new process with the same client id: subscriptions registered before
            // connect() receive the queued messages.
            let second = try client(broker, id: id, session: .persistent(expirySeconds: 3600))
            let subscription = try await second.subscribe("queue/#")
            try await second.connect()
            let received = try await collect(5, from: subscription)
            #expect(received.map(\.payloadString) == ["m0", "m1", "m2", "m3", "m4"])
            await second.disconnect()
            await publisher.disconnect()
        }
    }

    @Test func reconnectsAfterTheBrokerRestartsAndKeepsItsSession() async throws {
        try await withBroker(.open) { broker in
            let id = "survivor-\(UInt32.random(in: 0...UInt32.max))"
            let survivor = try MQTTClient(configuration: MQTTConfiguration(
                host: broker.host, port: broker.port, clientId: id,
                session: .persistent(expirySeconds: 3600), reconnectDelay: 1.5, reconnectDelayMax: 1.5))
            let subscription = try await survivor.subscribe("away/#")
            try await survivor.connect()
            var events = survivor.events.makeAsyncIterator()
            _ = await events.next()  // the first .connected

            try await broker.restart()
            // Published while the survivor is still waiting out its reconnect delay.
            let publisher = try client(broker)
            try await publisher.connect()
            try await publisher.publish("away/1", payload: Array("while-away".utf8))

            var reconnected = false
            while let event = await events.next() {
                if case .connected(let sessionPresent) = event {
                    #expect(sessionPresent)
                    reconnected = true
                    break
                }
            }
            #expect(reconnected)
            try await publisher.publish("away/2", payload: Array("after".utf8))
            let received = try await collect(2, from: subscription)
            #expect(received.map(\.payloadString) == ["while-away", "after"])
            await survivor.disconnect()
            await publisher.disconnect()
        }
    }

    @Test func aclDeniedPublishIsAnError() async throws {
        try await withBroker(.shipped) { broker in
            let alice = try client(broker, username: "alice", password: "alice-demo")
            try await alice.connect()
            // Allowed: her own room events.
            try await alice.publish("tandem/v1/rooms/r1/events/alice", payload: Array("{}".utf8))
            // Refused: speaking as bob.
            let error = await #expect(throws: MQTTError.self) {
                try await alice.publish("tandem/v1/rooms/r1/events/bob", payload: Array("{}".utf8))
            }
            #expect(error?.kind == .refused(reason: 0x87))
            await alice.disconnect()
        }
    }

    @Test func badCredentialsAreRefused() async throws {
        try await withBroker(.shipped) { broker in
            let mallory = try client(broker, username: "alice", password: "wrong")
            let error = await #expect(throws: MQTTError.self) { try await mallory.connect() }
            if case .connectionRefused = error?.kind {} else { Issue.record("expected a refusal, got \(String(describing: error))") }
            await mallory.disconnect()
        }
    }

    @Test func cancellingAWaitingPublishResumesIt() async throws {
        try await withBroker(.open) { broker in
            let c = try client(broker)
            try await c.connect()
            broker.pause()  // SIGSTOP: no PUBACK will come
            let task = Task { try await c.publish("slow/1", payload: [1, 2, 3]) }
            try await Task.sleep(for: .milliseconds(100))
            task.cancel()
            let result = await task.result
            #expect(throws: CancellationError.self) { try result.get() }
            broker.resume()
            await c.disconnect()
        }
    }

    @Test func aWaitingPublishFailsWhenTheConnectionDrops() async throws {
        try await withBroker(.open) { broker in
            let c = try client(broker)
            try await c.connect()
            broker.pause()
            let task = Task { try await c.publish("drop/1", payload: [1]) }
            try await Task.sleep(for: .milliseconds(100))
            await broker.stop()  // the socket closes: the publish must not hang
            let result = await task.result
            #expect(throws: MQTTError.self) { try result.get() }
            await c.disconnect()
        }
    }

    @Test func aMessageEnqueuedWhileDisconnectedIsSentAfterTheReconnect() async throws {
        try await withBroker(.open) { broker in
            let sender = try MQTTClient(configuration: MQTTConfiguration(
                host: broker.host, port: broker.port, clientId: "sender-\(UInt32.random(in: 0...UInt32.max))",
                session: .persistent(expirySeconds: 3600), reconnectDelay: 0.2, reconnectDelayMax: 0.2))
            try await sender.connect()
            var events = sender.events.makeAsyncIterator()
            _ = await events.next()  // connected

            await broker.stopGracefully()
            while let event = await events.next() {
                if case .disconnected = event { break }
            }
            // While the broker is down: libmosquitto keeps QoS 1 messages for later.
            try sender.enqueue("later/1", payload: Array("kept".utf8), qos: .atLeastOnce, retain: true)
            try await broker.restart()
            while let event = await events.next() {
                if case .connected = event { break }
            }
            let reader = try client(broker)
            try await reader.connect()
            let subscription = try await reader.subscribe("later/#")
            let message = try #require(try await first(of: subscription, seconds: 10))
            #expect(message.payloadString == "kept")
            await reader.disconnect()
            await sender.disconnect()
        }
    }

    @Test func unsubscribesWhenTheConsumerStops() async throws {
        try await withBroker(.open) { broker in
            let c = try client(broker)
            try await c.connect()
            do {
                let subscription = try await c.subscribe("gone/#")
                _ = subscription
            }
            // The stream is gone; publishing to it must not deliver anywhere or crash.
            try await c.publish("gone/1", payload: [1])
            let other = try await c.subscribe("still/#")
            try await c.publish("still/1", payload: [2])
            let message = try #require(try await first(of: other))
            #expect(message.topic == "still/1")
            await c.disconnect()
        }
    }

    /// A process with many open files (tandem-web holds a few per signed-in person)
    /// gives a new connection a descriptor numbered past 1,024, which `select(2)`, and so
    /// `mosquitto_loop()`, refuses. The client waits in `poll(2)`: such a connection
    /// publishes, subscribes, receives and disconnects like any other.
    @Test func aSocketNumberedPastSelectsLimitWorks() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 2048 {
            limit.rlim_cur = min(limit.rlim_max, 2048)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        try #require(limit.rlim_cur >= 1200, "this test needs at least 1,200 open files (ulimit -n); the hard limit is \(limit.rlim_max)")
        try await withBroker(.open) { broker in
            var held: [Int32] = []
            defer { held.forEach { close($0) } }
            // Every number below 1,100 taken (a new descriptor gets the lowest free
            // one); other tests running at the same time may free one meanwhile, so fill
            // the holes again and connect until the socket really is numbered past it.
            var high: MQTTClient?
            for _ in 0..<50 where high == nil {
                var fd: Int32
                repeat {
                    fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
                    try #require(fd >= 0, "open /dev/null: \(String(cString: strerror(errno)))")
                    held.append(fd)
                } while fd < 1100
                let candidate = try client(broker)
                try await candidate.connect()
                if candidate.core.socketDescriptor >= 1024 { high = candidate } else { await candidate.disconnect() }
            }
            let a = try #require(high, "no connection got a descriptor numbered 1,024 or more")
            let b = try client(broker)
            try await b.connect()
            let subscription = try await a.subscribe("high/#")
            for i in 0..<50 { try await b.publish("high/\(i)", payload: Array("m\(i)".utf8)) }
            let received = try await collect(50, from: subscription)
            #expect(received.map(\.payloadString) == (0..<50).map { "m\($0)" })
            // And the other way: the high connection publishes (QoS 1 waits for PUBACK;
            // enqueue is written by the loop thread once kicked).
            let back = try await b.subscribe("back/#")
            try await a.publish("back/1", payload: Array("one".utf8))
            try a.enqueue("back/2", payload: Array("two".utf8))
            #expect(try await collect(2, from: back).map(\.payloadString) == ["one", "two"])
            await a.disconnect()
            #expect(a.core.socketDescriptor < 0)
            await b.disconnect()
        }
    }
}

/// The first message of a subscription, or nil after `seconds`.
func first(of subscription: MQTTSubscription, seconds: Double = 5) async throws -> MQTTMessage? {
    try await collect(1, from: subscription, seconds: seconds).first
}

/// `count` messages, or fewer if `seconds` pass first.
func collect(_ count: Int, from subscription: MQTTSubscription, seconds: Double = 5) async throws -> [MQTTMessage] {
    try await withThrowingTaskGroup(of: [MQTTMessage].self) { group in
        group.addTask {
            var out: [MQTTMessage] = []
            for try await m in subscription {
                out.append(m)
                if out.count == count { break }
            }
            return out
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return []
        }
        let result = try await group.next() ?? []
        group.cancelAll()
        return result
    }
}

extension MosquittoBroker {
    /// SIGSTOP: the broker keeps its sockets open but answers nothing.
    func pause() {
        if let pid { kill(pid, SIGSTOP) }
    }

    func resume() {
        if let pid { kill(pid, SIGCONT) }
    }
}
