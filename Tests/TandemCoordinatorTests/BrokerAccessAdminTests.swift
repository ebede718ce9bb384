import Foundation
import Logging
import Synchronization
@testable import TandemCoordinator
import TandemCore
import TandemMQTT
import Testing
import TestSupport

/// BrokerAccessAdmin against a real mosquitto with the shipped dynamic-security
/// configuration: grants and revokes as members see them (retained state included),
/// reconcile from an older copy of the plugin's file, and its batching.
@Suite struct BrokerAccessAdminTests {
    @Test func aGrantedMemberReadsTheRetainedStateAndARevokedOneNothingMore() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await Listener.connect(broker, "coordinator")
            try await coordinator.publish("tandem/v1/rooms/r1/state", "v1", retain: true)
            let alice = try await Listener.connect(broker, "alice")
            let bob = try await Listener.connect(broker, "bob")
            let admin = try await startedAdmin(broker)

            try await admin.apply([.grant(user: "alice", room: "r1")])
            // No kick (modifyRole): alice's subscription, made before, now delivers the
            // room's next publication (as the coordinator publishes the invite's
            // snapshot right after the grant), and a new subscription the retained one.
            try await coordinator.publish("tandem/v1/rooms/r1/state", "v1b", retain: true)
            try await alice.waitFor("tandem/v1/rooms/r1/state", "v1b")
            let late = try await Listener.connect(broker, "alice")
            try await late.waitFor("tandem/v1/rooms/r1/state", "v1b")
            try await coordinator.publish("tandem/v1/rooms/r1/changes", "c1")
            try await alice.waitFor("tandem/v1/rooms/r1/changes", "c1")

            try await admin.apply([.revoke(user: "alice", room: "r1")])
            try await alice.waitUntilListening(coordinator)
            try await coordinator.publish("tandem/v1/rooms/r1/state", "v2", retain: true)
            try await coordinator.publish("tandem/v1/rooms/r1/changes", "c2")
            // Messages from one publisher arrive in order: the marker after them proves
            // they were withheld, not late.
            try await alice.waitUntilListening(coordinator)
            #expect(!alice.heard("tandem/v1/rooms/r1/state", "v2"))
            #expect(!alice.heard("tandem/v1/rooms/r1/changes", "c2"))

            try await bob.waitUntilListening(coordinator)
            #expect(bob.messages(on: "tandem/v1/rooms/r1/state").isEmpty)
            #expect(bob.messages(on: "tandem/v1/rooms/r1/changes").isEmpty)

            // Granting twice and revoking what is not granted are no errors.
            try await admin.apply([.grant(user: "bob", room: "r1"), .grant(user: "bob", room: "r1"), .revoke(user: "bob", room: "r9")])
            try await coordinator.publish("tandem/v1/rooms/r1/state", "v3", retain: true)
            try await bob.waitFor("tandem/v1/rooms/r1/state", "v3")
            #expect(try await admin.readableRooms() == ["alice": [], "bob": ["r1"], "carol": []])
            await admin.stop()
            for listener in [coordinator, alice, bob, late] { await listener.close() }
        }
    }

    /// Issue 21: with partitions, each partition's rooms are in roles of its own, so two
    /// processes (two admin connections) granting one user rooms of two partitions at
    /// the same time never undo each other's grant, and a partition's reconcile leaves
    /// the other partitions' rooms alone. (One role per user, read and rewritten by both,
    /// would lose some of these grants.)
    @Test func partitionsKeepRolesOfTheirOwnAndNeverUndoEachOthersGrants() async throws {
        try await withBroker(.shipped) { broker in
            let first = try await startedAdmin(broker)
            let second = try await startedAdmin(broker)
            // Each partition's first role is made and attached to every user up front.
            _ = try await first.reconcile([:], partition: 0)
            _ = try await second.reconcile([:], partition: 1)
            for round in 0..<12 {
                async let a: Void = first.apply([.grant(user: "alice", room: "p0-\(round)"), .grant(user: "bob", room: "p0-\(round)")], partition: 0)
                async let b: Void = second.apply([.grant(user: "alice", room: "p1-\(round)")], partition: 1)
                _ = try await (a, b)
            }
            let p0 = Set((0..<12).map { "p0-\($0)" }), p1 = Set((0..<12).map { "p1-\($0)" })
            #expect(try await first.readableRooms() == ["alice": p0.union(p1), "bob": p0, "carol": []])

            // Partition 1's reconcile with its own rooms: partition 0's stay.
            let report = try await second.reconcile(["alice": ["p1-0"]], partition: 1)
            #expect(report.revoked == 11)
            #expect(try await first.readableRooms() == ["alice": p0.union(["p1-0"]), "bob": p0, "carol": []])
            let parsed = RoomRoleNaming.parse("tandem-rooms-alice@p1:2")
            #expect(parsed?.user == "alice" && parsed?.shard == 2 && parsed?.partition == 1)
            #expect(RoomRoleNaming.parse("tandem-rooms-alice")?.partition == nil)
            #expect(RoomRoleNaming.parse("tandem-rooms-alice@x") == nil)
            await first.stop()
            await second.stop()
        }
    }

    @Test func aUserWhoIsNotABrokerClientIsAnErrorForThatUserAlone() async throws {
        try await withBroker(.shipped) { broker in
            let admin = try await startedAdmin(broker)
            do {
                try await admin.apply([
                    .grant(user: "mallory", room: "r1"), .grant(user: "alice", room: "r2"), .grant(user: "bob", room: "r/#"),
                ])
                Issue.record("no error")
            } catch let BrokerAccessError.refused(failures) {
                #expect(failures.map(\.user).sorted() == ["bob", "mallory"])
                #expect(failures.contains { $0.user == "mallory" && $0.reason == "Client not found" && $0.room == "r1" }, "\(failures)")
                #expect(failures.contains { $0.user == "bob" && $0.command == "validate" }, "\(failures)")
            }
            #expect(try await admin.readableRooms() == ["alice": ["r2"], "bob": [], "carol": []])
            #expect(try await admin.knownUsers() == ["alice", "bob", "carol"])

            let report = try await admin.reconcile(["mallory": ["r1"], "alice": ["r2"]])
            #expect(report.unknownUsers == ["mallory"])
            #expect(report.commands == 0)
            await admin.stop()
        }
    }

    /// The broker restarts with an older copy of its file: a grant revoked since is back,
    /// a role made since is missing. One reconcile makes it exactly what the coordinator
    /// knows; the next sends nothing.
    @Test func reconcileMakesAnOlderFileExactlyTheDesiredState() async throws {
        try await withBroker(.shipped) { broker in
            let admin = try await startedAdmin(broker)
            let first = try await admin.reconcile(["alice": ["r1", "r2"], "bob": ["r1"]])
            #expect(first.granted == 3 && first.revoked == 0 && first.failures.isEmpty, "\(first)")
            let path = try #require(broker.dynamicSecurityPath)
            let old = try Data(contentsOf: URL(fileURLWithPath: path))

            try await admin.apply([.revoke(user: "alice", room: "r2"), .grant(user: "bob", room: "r2"), .grant(user: "carol", room: "r3")])
            let desired: [String: Set<String>] = ["alice": ["r1"], "bob": ["r1", "r2"], "carol": ["r3", "r4"]]

            // The old copy, from before carol had a room role at all.
            var tree = try #require(try JSONSerialization.jsonObject(with: old) as? [String: Any])
            tree["roles"] = (tree["roles"] as? [[String: Any]] ?? []).filter { $0["rolename"] as? String != "tandem-rooms-carol" }
            tree["clients"] = (tree["clients"] as? [[String: Any]] ?? []).map { client in
                var client = client
                client["roles"] = (client["roles"] as? [[String: Any]] ?? []).filter { $0["rolename"] as? String != "tandem-rooms-carol" }
                return client
            }
            await broker.stopGracefully()
            try JSONSerialization.data(withJSONObject: tree).write(to: URL(fileURLWithPath: path))
            let events = admin.connectionEvents
            try await broker.restart()
            // The admin connection comes back by itself, and says so: the coordinator's cue to reconcile.
            var dropped = false
            for await event in events {
                if case .disconnected = event { dropped = true }
                if case .connected = event, dropped { break }
            }
            #expect(try await admin.readableRooms() == ["alice": ["r1", "r2"], "bob": ["r1"], "carol": []])

            let report = try await admin.reconcile(desired)
            #expect(report.failures.isEmpty, "\(report.failures)")
            #expect(report.granted == 3 && report.revoked == 1, "\(report)")
            #expect(report.changedUsers == ["alice", "bob", "carol"])
            #expect(try await admin.readableRooms() == desired)

            let again = try await admin.reconcile(desired)
            #expect(again.commands == 0 && again.messages == 1 && again.changedUsers.isEmpty, "\(again)")

            // What members see: a fresh subscription to everything delivers exactly their rooms.
            let coordinator = try await Listener.connect(broker, "coordinator")
            for room in ["r1", "r2", "r3", "r4"] {
                try await coordinator.publish("tandem/v1/rooms/\(room)/state", room, retain: true)
            }
            for (user, rooms) in desired {
                let listener = try await Listener.connect(broker, user)
                try await listener.waitUntilListening(coordinator)
                let heard = Set(listener.messages(on: nil).compactMap { $0.topic.hasSuffix("/state") ? $0.payloadString : nil })
                #expect(heard == rooms, "\(user)")
                await listener.close()
            }
            await admin.stop()
            await coordinator.close()
        }
    }

    /// Rooms that do not fit one control message go to overflow roles; they shrink and
    /// go away when the rooms do.
    @Test func manyRoomsSpreadOverOverflowRolesAndBack() async throws {
        try await withBroker(.shipped) { broker in
            let admin = try await startedAdmin(broker, maxMessageBytes: 2_000)
            let many = Set((0..<60).map { "room-\($0)" })
            let report = try await admin.reconcile(["alice": many, "bob": ["room-1"]])
            #expect(report.failures.isEmpty, "\(report.failures)")
            #expect(report.messages > 3, "\(report)")
            #expect(try await admin.readableRooms() == ["alice": many, "bob": ["room-1"], "carol": []])
            // Each room whole (read and cursor) in one of alice's roles.
            #expect(try await admin.roomGrants()["alice"] == Dictionary(uniqueKeysWithValues: many.map { ($0, Set(RoomGrant.allCases)) }))
            #expect(try await admin.reconcile(["alice": many, "bob": ["room-1"]]).commands == 0)

            // A grant and a revoke land wherever the room is.
            try await admin.apply([.revoke(user: "alice", room: "room-59"), .grant(user: "alice", room: "extra")])
            #expect(try await admin.readableRooms()["alice"] == many.subtracting(["room-59"]).union(["extra"]))

            let few: Set<String> = ["room-3", "room-40"]
            let shrink = try await admin.reconcile(["alice": few])
            #expect(shrink.failures.isEmpty, "\(shrink.failures)")
            #expect(try await admin.readableRooms() == ["alice": few, "bob": [], "carol": []])
            #expect(try await admin.reconcile(["alice": few]).commands == 0)
            await admin.stop()
        }
    }
}

func startedAdmin(_ broker: MosquittoBroker, maxMessageBytes: Int = 60_000) async throws -> BrokerAccessAdmin {
    let admin = BrokerAccessAdmin(
        configuration: MQTTConfiguration(
            host: broker.host, port: broker.port, clientId: "coordinator-admin-\(UInt32.random(in: 0...UInt32.max))",
            username: "coordinator-admin", password: "coordinator-admin-demo", reconnectDelay: 0.1, reconnectDelayMax: 0.5),
        topicRoot: "tandem/v1", logger: Logger(label: "test.broker-admin"), maxMessageBytes: maxMessageBytes)
    try await admin.start()
    return admin
}

/// A demo user's MQTT client subscribed to everything (`#`), recording what it hears
/// and how often its connection dropped. A kicked client reconnects and subscribes again
/// by itself.
final class Listener: Sendable {
    let user: String
    let client: MQTTClient
    private let heard = Mutex<[MQTTMessage]>([])
    private let dropCount = Mutex(0)
    private let watcher = Mutex<Task<Void, Never>?>(nil)

    static func connect(_ broker: MosquittoBroker, _ user: String) async throws -> Listener {
        let client = try MQTTClient(configuration: MQTTConfiguration(
            host: broker.host, port: broker.port, clientId: "\(user)-\(UInt32.random(in: 0...UInt32.max))",
            username: user, password: "\(user)-demo", reconnectDelay: 0.05, reconnectDelayMax: 0.2))
        let listener = Listener(user: user, client: client)
        if user != "coordinator" {
            try await client.subscribe(["#"]) { [listener] message in
                listener.record(message)
            }
        }
        let events = client.events
        listener.watcher.withLock {
            $0 = Task { [listener] in
                for await event in events {
                    if case .disconnected = event { listener.dropCount.withLock { $0 += 1 } }
                }
            }
        }
        try await client.connect()
        return listener
    }

    /// How many times the connection dropped (a kick by the plugin is one) since it was made.
    var drops: Int { dropCount.withLock { $0 } }

    private init(user: String, client: MQTTClient) {
        self.user = user
        self.client = client
    }

    /// Disconnects for good: a listener left connected would try to reconnect to its
    /// stopped broker for the rest of the test run.
    func close() async {
        watcher.withLock { $0?.cancel() }
        await client.disconnect()
    }

    private func record(_ message: MQTTMessage) {
        heard.withLock { $0.append(message) }
    }

    func publish(_ topic: String, _ text: String, retain: Bool = false) async throws {
        try await client.publish(topic, payload: Array(text.utf8), qos: .atLeastOnce, retain: retain)
    }

    /// Publishes a cursor as the contract has it (QoS 0, not retained) on `level`'s
    /// cursor topic of `room`: its own level, or another's to prove it is refused.
    func cursor(_ room: String, as level: String? = nil, _ text: String) throws {
        try client.enqueue("tandem/v1/rooms/\(room)/cursors/\(level ?? user)", payload: Array(text.utf8), qos: .atMostOnce)
    }

    /// A QoS 0 message on this user's own presence topic, which every user reads. QoS 0
    /// messages from one connection reach each subscriber in the order they were sent, so
    /// once a reader has this marker, every cursor this user sent before it has been
    /// delivered to that reader or withheld.
    func presenceMarker() throws -> String {
        let marker = "marker-\(UInt64.random(in: 0...UInt64.max))"
        try client.enqueue("tandem/v1/presence/\(user)/listener", payload: Array(marker.utf8), qos: .atMostOnce)
        return marker
    }

    func messages(on topic: String?) -> [MQTTMessage] {
        heard.withLock { all in all.filter { topic == nil || $0.topic == topic } }
    }

    func heard(_ topic: String, _ text: String) -> Bool {
        messages(on: topic).contains { $0.payloadString == text }
    }

    func waitFor(_ topic: String, _ text: String, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !heard(topic, text) {
            guard ContinuousClock.now < deadline else {
                throw ListenerError("\(user) heard no \(text) on \(topic) within \(timeout); heard \(messages(on: nil).map(\.topic))")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Returns once this client is connected and subscribed: the coordinator publishes
    /// markers on its status topic (which every user reads) until one arrives. Whatever
    /// the coordinator published before the marker that arrived has been delivered or
    /// withheld by then.
    func waitUntilListening(_ coordinator: Listener, timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let marker = "marker-\(UInt64.random(in: 0...UInt64.max))"
            try await coordinator.publish("tandem/v1/coordinator/status", marker)
            if (try? await waitFor("tandem/v1/coordinator/status", marker, timeout: .seconds(1))) != nil { return }
        }
        throw ListenerError("\(user) heard no marker within \(timeout)")
    }
}

struct ListenerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
