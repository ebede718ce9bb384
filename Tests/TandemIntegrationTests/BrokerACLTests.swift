import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// broker-config/dynamic-security.json, checked rule by rule against the shipped broker
/// with the mosquitto command-line clients. A message is "through" when the other side
/// receives it: mosquitto acknowledges a refused publish and drops it, and grants
/// every subscription but never delivers what the subscriber may not read.
/// Retained messages make each check one publish and one bounded read.
@Suite struct BrokerACLTests {
    static let ownInboundTopics = [
        "tandem/v1/rooms/r1/events/{u}",
        "tandem/v1/users/{u}/dm/commands",
        "tandem/v1/users/{u}/workouts/w1/control/phone",
        "tandem/v1/users/{u}/workouts/w1/flight/watch",
        "tandem/v1/users/{u}/workouts/w1/health/watch",
        "tandem/v1/users/{u}/requests",
        "tandem/v1/presence/{u}/phone-1",
    ]

    @Test(arguments: ACLRoot.all, ["alice", "bob", "carol"])
    func userWritesItsOwnInboundTopics(root: ACLRoot, user: String) async throws {
        try await root.withBroker { broker in
            for pattern in Self.ownInboundTopics {
                let topic = pattern.replacingOccurrences(of: "{u}", with: user)
                let through = try await delivered(broker, root, from: user, to: "coordinator", topic: topic)
                #expect(through, "\(topic)")
            }
        }
    }

    @Test(arguments: ACLRoot.all, [
        // as someone else
        "tandem/v1/rooms/r1/events/bob",
        "tandem/v1/users/bob/dm/commands",
        "tandem/v1/users/bob/workouts/w1/control/phone",
        "tandem/v1/users/bob/workouts/w1/flight/phone",
        "tandem/v1/users/bob/workouts/w1/health/watch",
        "tandem/v1/users/bob/requests",
        "tandem/v1/presence/bob/phone-1",
        // a cursor, even on her own level: only a room role grants that, per room
        "tandem/v1/rooms/r1/cursors/alice",
        "tandem/v1/rooms/r1/cursors/bob",
        // one level too deep
        "tandem/v1/rooms/r1/events/alice/x",
        "tandem/v1/presence/alice/phone-1/x",
    ] + BrokerACLTests.coordinatorOnlyTopics)
    func aliceCannotWrite(root: ACLRoot, topic: String) async throws {
        try await root.withBroker { broker in
            let through = try await delivered(broker, root, from: "alice", to: "coordinator", topic: topic)
            #expect(!through)
        }
    }

    /// What only the coordinator publishes.
    static let coordinatorOnlyTopics = [
        "tandem/v1/rooms/r1/state",
        "tandem/v1/rooms/r1/changes",
        "tandem/v1/users/alice/receipts",
        "tandem/v1/users/alice/dm/conversations/bob",
        "tandem/v1/users/alice/workouts/w1/state",
        "tandem/v1/coordinator/status",
        "tandem/v1/coordinator/metrics",
    ]

    @Test(arguments: ACLRoot.all, BrokerACLTests.coordinatorOnlyTopics)
    func coordinatorWritesOutboundTopics(root: ACLRoot, topic: String) async throws {
        try await root.withBroker { broker in
            // Room topics are read by members only: the coordinator itself reads them back.
            let reader = topic.contains("/rooms/") ? "coordinator" : "alice"
            let through = try await delivered(broker, root, from: "coordinator", to: reader, topic: topic)
            #expect(through)
        }
    }

    /// (subscription, topic published, whether alice receives it)
    @Test(arguments: ACLRoot.all, [
        ("tandem/v1/users/alice/#", "tandem/v1/users/alice/receipts", true),
        ("tandem/v1/users/alice/dm/conversations/+", "tandem/v1/users/alice/dm/conversations/bob", true),
        ("tandem/v1/users/alice/workouts/+/state", "tandem/v1/users/alice/workouts/w1/state", true),
        // her phone follows her watch, and the other way round
        ("tandem/v1/users/alice/workouts/w1/flight/+", "tandem/v1/users/alice/workouts/w1/flight/watch", true),
        ("tandem/v1/users/alice/workouts/w1/health/watch", "tandem/v1/users/alice/workouts/w1/health/watch", true),
        // rooms she is not a member of (no tandem-rooms-alice ACL): nothing, whatever she
        // subscribes to
        ("tandem/v1/rooms/+/state", "tandem/v1/rooms/r1/state", false),
        ("tandem/v1/rooms/r1/state", "tandem/v1/rooms/r1/state", false),
        ("tandem/v1/rooms/+/changes", "tandem/v1/rooms/r1/changes", false),
        ("tandem/v1/rooms/+/cursors/+", "tandem/v1/rooms/r1/cursors/bob", false),
        ("tandem/v1/rooms/#", "tandem/v1/rooms/r1/state", false),
        ("tandem/v1/#", "tandem/v1/rooms/r1/state", false),
        ("#", "tandem/v1/rooms/r1/changes", false),
        ("tandem/v1/presence/#", "tandem/v1/presence/bob/phone-1", true),
        ("tandem/v1/coordinator/#", "tandem/v1/coordinator/status", true),
        ("tandem/v1/#", "tandem/v1/coordinator/status", true),
        ("tandem/v1/users/bob/#", "tandem/v1/users/bob/receipts", false),
        ("tandem/v1/users/+/receipts", "tandem/v1/users/bob/receipts", false),
        ("tandem/v1/users/bob/workouts/w1/health/watch", "tandem/v1/users/bob/workouts/w1/health/watch", false),
        ("tandem/v1/rooms/r1/events/+", "tandem/v1/rooms/r1/events/bob", false),
        ("tandem/v1/#", "tandem/v1/users/bob/receipts", false),
        ("#", "tandem/v1/rooms/r1/events/alice", false),
    ])
    func aliceReads(root: ACLRoot, rule: (String, String, Bool)) async throws {
        let (subscription, topic, allowed) = rule
        try await root.withBroker { broker in
            let received = try await delivered(
                broker, root, from: "coordinator", to: "alice", topic: topic, subscription: subscription)
            #expect(received == allowed)
        }
    }

    /// (a wildcard subscription the coordinator makes, what bob publishes)
    @Test(arguments: ACLRoot.all, [
        ("tandem/v1/rooms/+/events/+", "tandem/v1/rooms/r1/events/bob"),
        ("tandem/v1/users/+/dm/commands", "tandem/v1/users/bob/dm/commands"),
        ("tandem/v1/users/+/workouts/+/control/+", "tandem/v1/users/bob/workouts/w1/control/phone"),
        ("tandem/v1/users/+/workouts/+/flight/+", "tandem/v1/users/bob/workouts/w1/flight/watch"),
        ("tandem/v1/users/+/workouts/+/health/+", "tandem/v1/users/bob/workouts/w1/health/watch"),
        ("tandem/v1/users/+/requests", "tandem/v1/users/bob/requests"),
        ("tandem/v1/presence/+/+", "tandem/v1/presence/bob/phone-1"),
    ])
    func coordinatorReadsInbound(root: ACLRoot, rule: (String, String)) async throws {
        let (subscription, topic) = rule
        try await root.withBroker { broker in
            let through = try await delivered(
                broker, root, from: "bob", to: "coordinator", topic: topic, subscription: subscription)
            #expect(through)
        }
    }

    @Test(arguments: ACLRoot.all)
    func aWillOnlyFiresOnTheUsersOwnPresenceTopic(root: ACLRoot) async throws {
        try await root.withBroker { broker in
            for (owner, fires) in [("alice", true), ("bob", false)] {
                let will = root.map("tandem/v1/presence/\(owner)/alice-phone")
                let client = try ChildProcess(
                    "mosquitto_sub",
                    broker.arguments(user: "alice") + [
                        "-i", "alice-phone", "-t", root.map("tandem/v1/coordinator/status"),
                        "--will-topic", will, "--will-payload", #"{"online":false}"#,
                        "--will-qos", "1", "--will-retain",
                    ])
                try await Task.sleep(for: .milliseconds(300))
                #expect(client.isRunning, "\(client.standardError)")
                client.signal(SIGKILL)
                _ = await client.waitForExit(timeout: .seconds(5))
                let read = try await ChildProcess.run(
                    "mosquitto_sub", broker.arguments(user: "coordinator") + ["-t", will, "-C", "1", "-W", "1"])
                #expect((read.standardOutput == "{\"online\":false}\n") == fires, "\(will)")
            }
        }
    }

    /// A room is read through its grant in tandem-rooms-NAME alone: the retained state
    /// is withheld before it, delivered after it (the plugin kicks alice, her client
    /// reconnects and subscribes again), withheld again after its removal; bob, never
    /// granted, reads nothing throughout.
    @Test(arguments: ACLRoot.all)
    func aRoomIsReadOnlyThroughItsGrant(root: ACLRoot) async throws {
        try await root.withBroker { broker in
            let state = root.map("tandem/v1/rooms/r1/state")
            let changes = root.map("tandem/v1/rooms/r1/changes")
            func readable(_ user: String, _ topic: String, subscription: String = "tandem/v1/#") async throws -> Bool {
                try await delivered(broker, root, from: "coordinator", to: user, topic: topic, subscription: subscription)
            }
            let beforeGrant = try await readable("alice", state)
            #expect(!beforeGrant)
            try await broker.dynsec([
                ["command": "addRoleACL", "rolename": "tandem-rooms-alice", "acltype": "publishClientReceive", "topic": state, "allow": true],
                ["command": "addRoleACL", "rolename": "tandem-rooms-alice", "acltype": "publishClientReceive", "topic": changes, "allow": true],
            ])
            for subscription in ["tandem/v1/#", "tandem/v1/rooms/+/state", "#"] {
                #expect(try await readable("alice", state, subscription: subscription), "\(subscription)")
            }
            // (A subscription to the topic itself: a wide one would hand over the state first.)
            #expect(try await readable("alice", changes, subscription: changes))
            let bobNeverGranted = try await readable("bob", state)
            #expect(!bobNeverGranted)
            let otherRoom = try await readable("alice", root.map("tandem/v1/rooms/r2/state"), subscription: root.map("tandem/v1/rooms/r2/state"))
            #expect(!otherRoom)
            try await broker.dynsec([
                ["command": "removeRoleACL", "rolename": "tandem-rooms-alice", "acltype": "publishClientReceive", "topic": state],
                ["command": "removeRoleACL", "rolename": "tandem-rooms-alice", "acltype": "publishClientReceive", "topic": changes],
            ])
            let stateAfterRevoke = try await readable("alice", state)
            #expect(!stateAfterRevoke)
            let changesAfterRevoke = try await readable("alice", changes)
            #expect(!changesAfterRevoke)
        }
    }

    /// The admin accounts administer the plugin and nothing else: no Tandem topic.
    @Test(arguments: ["coordinator-admin", "admin"])
    func adminAccountsTouchNoTandemTopic(user: String) async throws {
        let root = ACLRoot.all[0]
        try await root.withBroker { broker in
            let adminWritesEvents = try await delivered(broker, root, from: user, to: "coordinator", topic: "tandem/v1/rooms/r1/events/\(user)")
            #expect(!adminWritesEvents)
            let adminWritesStatus = try await delivered(broker, root, from: user, to: "alice", topic: "tandem/v1/coordinator/status")
            #expect(!adminWritesStatus)
            let adminReadsStatus = try await delivered(broker, root, from: "coordinator", to: user, topic: "tandem/v1/coordinator/status")
            #expect(!adminReadsStatus)
            let adminReadsRooms = try await delivered(broker, root, from: "coordinator", to: user, topic: "tandem/v1/rooms/r1/state", subscription: "#")
            #expect(!adminReadsRooms)
        }
    }

    /// scripts/broker-user on a running broker: the new user logs in, writes its own
    /// levels only, reads no room; removed, it cannot log in. Passwords come from stdin
    /// and the environment, never arguments.
    @Test func brokerUserAddsAndRemovesAUserWithoutARestart() async throws {
        try await withBroker(.shipped) { broker in
            let folder = try makeTemporaryDirectory(prefix: "broker-user-")
            try "dave-secret\n".write(toFile: folder + "/password", atomically: true, encoding: .utf8)
            func brokerUser(_ arguments: [String]) async throws -> (Int32?, String) {
                let child = try ChildProcess(
                    "/bin/bash", [MosquittoBroker.repositoryRoot + "/scripts/broker-user", "--port", "\(broker.port)"] + arguments,
                    addingEnvironment: ["TANDEM_BROKER_ADMIN_PASSWORD": "admin-demo"], standardInput: folder + "/password")
                let code = await child.waitForExit(timeout: .seconds(30))
                return (code, child.standardError)
            }
            let (added, addLog) = try await brokerUser(["add", "dave"])
            try #require(added == 0, "\(addLog)")
            let dave = ["-h", broker.host, "-p", "\(broker.port)", "-u", "dave", "-P", "dave-secret"]
            func deliveredFromDave(_ topic: String) async throws -> Bool {
                let marker = "m-\(UInt64.random(in: 0...UInt64.max))"
                let publish = try await ChildProcess.run("mosquitto_pub", dave + ["-q", "1", "-r", "-t", topic, "-m", marker])
                try #require(publish.exitCode == 0, "\(publish.standardError)")
                let read = try await ChildProcess.run(
                    "mosquitto_sub", broker.arguments(user: "coordinator") + ["-q", "1", "-t", topic, "-C", "1", "-W", "1"])
                return read.standardOutput == marker + "\n"
            }
            #expect(try await deliveredFromDave("tandem/v1/rooms/r1/events/dave"))
            let forged = try await deliveredFromDave("tandem/v1/rooms/r1/events/alice")
            #expect(!forged)
            let state = try await ChildProcess.run(
                "mosquitto_pub", broker.arguments(user: "coordinator") + ["-q", "1", "-r", "-t", "tandem/v1/rooms/r1/state", "-m", "s"])
            try #require(state.exitCode == 0)
            let read = try await ChildProcess.run("mosquitto_sub", dave + ["-t", "tandem/v1/#", "-C", "1", "-W", "1"])
            #expect(!read.standardOutput.contains("s\n"), "\(read.standardOutput)")

            let (again, againLog) = try await brokerUser(["add", "dave"])
            #expect(again == 1 && againLog.contains("already exists"), "\(againLog)")
            let (removed, removeLog) = try await brokerUser(["remove", "dave"])
            #expect(removed == 0, "\(removeLog)")
            let login = try await ChildProcess.run("mosquitto_pub", dave + ["-t", "tandem/v1/presence/dave/x", "-m", "{}"])
            #expect(login.exitCode != 0)
            let (refused, refusedLog) = try await brokerUser(["remove", "coordinator"])
            #expect(refused == 1, "\(refusedLog)")
            let (usage, _) = try await brokerUser(["add"])
            #expect(usage == 64)
        }
    }

    /// Tandem users and the coordinator cannot administer the plugin.
    @Test(arguments: ["alice", "coordinator"])
    func onlyAdminsMayAdminister(user: String) async throws {
        try await withBroker(.shipped) { broker in
            let command = #"{"commands":[{"command":"createClient","username":"mallory","password":"x"}]}"#
            let publish = try await ChildProcess.run(
                "mosquitto_pub", broker.arguments(user: user) + ["-q", "1", "-t", "$CONTROL/dynamic-security/v1", "-m", command])
            #expect(publish.exitCode == 0, "\(publish.standardError)")
            let login = try await ChildProcess.run(
                "mosquitto_pub", ["-h", broker.host, "-p", "\(broker.port)", "-u", "mallory", "-P", "x", "-t", "tandem/v1/presence/mallory/x", "-m", "{}"])
            #expect(login.exitCode != 0)
        }
    }

    @Test(arguments: [
        ["-u", "alice", "-P", "bob-demo"],
        ["-u", "mallory", "-P", "mallory-demo"],
        [],
    ])
    func strangersAreRefused(credentials: [String]) async throws {
        try await withBroker(.shipped) { broker in
            let result = try await ChildProcess.run(
                "mosquitto_pub",
                ["-h", broker.host, "-p", "\(broker.port)", "-t", "tandem/v1/presence/alice/x", "-m", "{}"]
                    + credentials)
            #expect(result.exitCode != 0)
            #expect(result.standardError.contains("not authorised"), "\(result.standardError)")
        }
    }
}

/// The shipped files stay what the generator writes, and a clean start is quiet.
@Suite struct BrokerConfigTests {
    static let demoUsers = [
        "coordinator:coordinator-demo", "coordinator-admin:coordinator-admin-demo", "admin:admin-demo",
        "alice:alice-demo", "bob:bob-demo", "carol:carol-demo",
    ]

    /// Everything but the salted hashes (a new salt every run); the shipped hashes are
    /// proven by every test that logs in with a demo password.
    @Test func theShippedDynamicSecurityFileIsTheGeneratorsOutputForTheDemoUsers() async throws {
        let folder = try makeTemporaryDirectory(prefix: "dynsec-")
        let made = try await ChildProcess.run("/usr/bin/env", [
            "python3", MosquittoBroker.repositoryRoot + "/scripts/gen-broker-auth", folder] + Self.demoUsers)
        try #require(made.exitCode == 0, "\(made.standardError)")
        func unsalted(_ path: String) throws -> NSDictionary {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            let tree = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            var copy = tree
            copy["clients"] = (tree["clients"] as? [[String: Any]] ?? []).map { client in
                client.filter { $0.key != "password" && $0.key != "salt" }
            }
            return copy as NSDictionary
        }
        let generated = try unsalted(folder + "/dynamic-security.json")
        let shipped = try unsalted(MosquittoBroker.repositoryRoot + "/broker-config/dynamic-security.json")
        #expect(generated == shipped, "broker-config/dynamic-security.json differs from scripts/gen-broker-auth's output: regenerate it")
    }

    @Test(arguments: ["", "nobody", "alice:", "bad name:pw", "admin:again"])
    func theGeneratorRefusesBadUsers(_ entry: String) async throws {
        let folder = try makeTemporaryDirectory(prefix: "dynsec-")
        let made = try await ChildProcess.run("/usr/bin/env", [
            "python3", MosquittoBroker.repositoryRoot + "/scripts/gen-broker-auth", folder,
            "coordinator:x", "coordinator-admin:y", "admin:z"] + (entry.isEmpty ? ["--topic-root"] : [entry]))
        #expect(made.exitCode == 64, "\(made.standardError)")
    }

    @Test(arguments: ["coordinator", "coordinator-admin", "admin"])
    func theGeneratorWantsEverySpecialAccount(_ missing: String) async throws {
        let folder = try makeTemporaryDirectory(prefix: "dynsec-")
        let made = try await ChildProcess.run("/usr/bin/env", [
            "python3", MosquittoBroker.repositoryRoot + "/scripts/gen-broker-auth", folder]
            + Self.demoUsers.filter { !$0.hasPrefix(missing + ":") })
        #expect(made.exitCode == 64)
        #expect(made.standardError.contains("'\(missing)' is not in the list"), "\(made.standardError)")
    }

    /// Issue 14: the broker logged four ACL-pattern warnings and a note on
    /// message_size_limit at every start. (Running as root is this machine's business:
    /// mosquitto says so, and that line alone is let through.)
    @Test func aCleanStartOfTheShippedConfigurationLogsNoWarning() async throws {
        try await withBroker(.shipped, certificates: try await makeCertificates()) { broker in
            try await Task.sleep(for: .milliseconds(300))
            let noise = broker.log.split(separator: "\n").filter {
                ($0.contains("Warning") || $0.contains("Note:")) && !$0.contains("should not be run as root")
            }
            #expect(noise.isEmpty, "\(noise)")
        }
    }
}

extension MosquittoBroker {
    func arguments(user: String) -> [String] {
        ["-h", host, "-p", "\(port)", "-u", user, "-P", "\(user)-demo"]
    }

    /// Sends dynamic-security commands as `admin` and waits for the plugin's answer,
    /// which must hold no error.
    func dynsec(_ commands: [[String: Any]]) async throws {
        let payload = String(decoding: try JSONSerialization.data(withJSONObject: ["commands": commands]), as: UTF8.self)
        // mosquitto_rr subscribes to the response topic before it publishes the request.
        let exchange = try await ChildProcess.run(
            "mosquitto_rr", arguments(user: "admin") + [
                "-t", "$CONTROL/dynamic-security/v1", "-e", "$CONTROL/dynamic-security/v1/response", "-m", payload, "-W", "10",
            ])
        try #require(exchange.exitCode == 0, "\(exchange.standardError)")
        let answer = exchange.standardOutput
        #expect(answer.contains("responses") && !answer.contains("\"error\""), "\(answer)")
    }
}

/// Whether a retained message `from` publishes on `topic` reaches `to` subscribed
/// to `subscription` (default: the topic itself) within a second.
private func delivered(
    _ broker: MosquittoBroker, _ root: ACLRoot, from publisher: String, to reader: String, topic: String,
    subscription: String? = nil
) async throws -> Bool {
    let topic = root.map(topic)
    let subscription = subscription.map(root.map)
    let marker = "m-\(UInt64.random(in: 0...UInt64.max))"
    let publish = try await ChildProcess.run(
        "mosquitto_pub", broker.arguments(user: publisher) + ["-q", "1", "-r", "-t", topic, "-m", marker])
    try #require(publish.exitCode == 0, "\(publish.standardError)")
    let read = try await ChildProcess.run(
        "mosquitto_sub",
        broker.arguments(user: reader) + ["-q", "1", "-t", subscription ?? topic, "-C", "1", "-W", "1"])
    return read.standardOutput == marker + "\n"
}

/// The topic root an ACL is proven for: the shipped broker-config/dynamic-security.json
/// (tandem/v1), and one written by scripts/gen-broker-auth for another root, with the
/// same rules. The
/// rules above are written for tandem/v1 and mapped onto the root under test.
struct ACLRoot: Sendable, CustomTestStringConvertible {
    let root: String
    static let all = [ACLRoot(root: "tandem/v1"), ACLRoot(root: "acme/sync/v2")]
    var testDescription: String { root }

    func map(_ topic: String) -> String {
        topic.hasPrefix("tandem/v1") ? root + topic.dropFirst("tandem/v1".count) : topic
    }

    func withBroker(_ body: (MosquittoBroker) async throws -> Void) async throws {
        if root == "tandem/v1" {
            try await TestSupport.withBroker(.shipped, body)
            return
        }
        let folder = try makeTemporaryDirectory(prefix: "dynsec-")
        let made = try await ChildProcess.run("/usr/bin/env", [
            "python3", MosquittoBroker.repositoryRoot + "/scripts/gen-broker-auth", "--topic-root", root, folder,
        ] + BrokerConfigTests.demoUsers)
        try #require(made.exitCode == 0, "\(made.standardError)")
        try await TestSupport.withBroker(.generated(folder), body)
    }
}
