import Testing
@testable import TandemCore
@testable import TandemEngine

/// Partitions (issue 21, item 2), the pure part: the stable hash, and engines that each
/// hold one partition and see every message, as each partition's MQTT session does.
@Suite struct PartitionTests {
    static let t0: Millis = 1_800_000_000_000

    @Test func theHashIsFNV1a64AndStable() {
        // The published FNV-1a test vectors: the empty string is the offset basis.
        #expect(Partitioning.hash("") == 0xcbf2_9ce4_8422_2325)
        #expect(Partitioning.hash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(Partitioning.hash("foobar") == 0x85944171f73967e8)
        let four = Partitioning(count: 4)!
        // Written down in docs/PROTOCOL.md: another implementation checks against these.
        #expect(four.partition(ofRoom: "r1") == Int(Partitioning.hash("r1") % 4))
        #expect(four.partition(ofConversation: "bob", "alice") == four.partition(ofConversation: "alice", "bob"))
        #expect(Partitioning.conversationKey("bob", "alice") == "alice/bob")
        #expect(Partitioning.single.partition(ofRoom: "anything") == 0)
        #expect(Partitioning(count: 0) == nil && Partitioning(count: Partitioning.maximum + 1) == nil)
    }

    @Test func roomsSpreadOverThePartitions() {
        for count in [2, 3, 4, 8] {
            let p = Partitioning(count: count)!
            var rooms = [Int](repeating: 0, count: count)
            for i in 0..<4_000 { rooms[p.partition(ofRoom: "room-\(i)")] += 1 }
            let fair = 4_000 / count
            #expect(rooms.allSatisfy { abs($0 - fair) < fair / 5 }, "\(count) partitions: \(rooms)")
        }
    }

    /// The same messages to one engine, and to three that each hold one partition:
    /// every receipt is published exactly once over the three, the same as the one
    /// engine's, and every retained snapshot ends the same.
    @Test(arguments: [2, 3, 5])
    func partitionsAnswerEachMessageOnceAndEndInTheSameState(_ count: Int) throws {
        let messages = Self.scenario(seed: UInt64(count))
        let single = Self.run(messages, partitioning: .single)
        let partitioning = try #require(Partitioning(count: count))
        var parts: [Outcome] = []
        for k in 0..<count { parts.append(Self.run(messages, partitioning: partitioning, partition: k)) }

        // The scenario has what it is meant to: accepted, refused, resent.
        #expect(single.metrics.accepted > 100 && single.metrics.rejected > 50 && single.metrics.duplicates > 5, "\(single.metrics.accepted) \(single.metrics.rejected) \(single.metrics.duplicates)")
        let receipts = parts.flatMap(\.receipts)
        #expect(receipts.count == single.receipts.count)
        #expect(receipts.sorted() == single.receipts.sorted())
        var retained: [String: [UInt8]] = [:]
        for part in parts {
            for (topic, payload) in part.retained {
                #expect(retained[topic] == nil, "\(topic) is published by two partitions")
                retained[topic] = payload
            }
        }
        #expect(retained == single.retained)
        // Each message counted once over the partitions; the rest left to the others.
        #expect(parts.map(\.metrics.messagesIn).reduce(0, +) == single.metrics.messagesIn)
        #expect(parts.map(\.metrics.dropped).reduce(0, +) == single.metrics.dropped)
        #expect(parts.map(\.metrics.accepted).reduce(0, +) == single.metrics.accepted)
        #expect(parts.allSatisfy { $0.metrics.accepted > 0 }, "every partition holds something")
        #expect(parts.map(\.metrics.messagesElsewhere).reduce(0, +) > 0)
        #expect(single.metrics.messagesElsewhere == 0)
    }

    struct Outcome {
        var receipts: [String] = []
        var retained: [String: [UInt8]] = [:]
        var metrics = Metrics()
    }

    static func run(_ messages: [(at: Millis, topic: String, payload: [UInt8])], partitioning: Partitioning, partition: Int = 0) -> Outcome {
        var c = EngineConfiguration()
        c.partitioning = partitioning
        c.partition = partition
        var engine = Engine(configuration: c, epoch: "e0", now: t0)
        var outcome = Outcome()
        func take(_ publications: [Publication]) {
            for p in publications {
                if p.topic.hasSuffix("/receipts") { outcome.receipts.append(p.topic + " " + String(decoding: p.payload, as: UTF8.self)) }
                if p.retain { outcome.retained[p.topic] = p.payload }
            }
        }
        for m in messages {
            take(engine.step(now: m.at).publications)
            take(engine.ingest(topic: m.topic, payload: m.payload, now: m.at))
        }
        let end = (messages.last?.at ?? t0) + 60_000
        take(engine.step(now: end).publications)
        take(engine.flush(at: Engine.Now(end)).publications)
        outcome.metrics = engine.metrics
        return outcome
    }

    /// Rooms made, joined and edited by five users (some edits refused: not members,
    /// held by another), chats between them, workouts, presence coming and going, and
    /// messages no one can place or whose payload cannot be read.
    static func scenario(seed: UInt64) -> [(at: Millis, topic: String, payload: [UInt8])] {
        var rng = SplitMix64(seed: seed)
        func roll(_ upper: Int) -> Int { Int.random(in: 0..<upper, using: &rng) }
        let users = ["alice", "bob", "carol", "dave", "erin"]
        let rooms = (0..<12).map { "room-\($0)" }
        var out: [(at: Millis, topic: String, payload: [UInt8])] = []
        var t = t0
        var n = 0
        func id() -> String { n += 1; return "m\(n)" }
        func add(_ topic: String, _ payload: JSON) { out.append((t, "tandem/v1/" + topic, payload.serialized())) }
        for room in rooms {
            let owner = users[roll(users.count)]
            add("rooms/\(room)/events/\(owner)", .obj(["eventId": .string(id()), "type": "create", "stickerId": "s0", "timestamp": .int(t),
                                                       "image": "a.png", "frame": .obj(["x": 1, "y": 2, "width": 3, "height": 4])]))
            for member in users where member != owner && roll(2) == 0 {
                add("rooms/\(room)/events/\(owner)", .obj(["eventId": .string(id()), "type": "invite", "member": .string(member), "timestamp": .int(t)]))
            }
            t += 7
        }
        for _ in 0..<600 {
            t += Millis(roll(12))
            let user = users[roll(users.count)]
            switch roll(20) {
            case 0..<11:
                let room = rooms[roll(rooms.count)]
                let sticker = "s\(roll(4))"
                let kinds = ["create", "acquire", "update", "release", "delete"]
                var event: [String: JSON] = ["eventId": .string(id()), "type": .string(kinds[roll(kinds.count)]),
                                             "stickerId": .string(sticker), "timestamp": .int(t - Millis(roll(20)))]
                event["image"] = "b.png"
                event["frame"] = .obj(["x": .int(Millis(roll(100))), "y": 2, "width": 3, "height": 4])
                add("rooms/\(room)/events/\(user)", .object(event.sorted { $0.key < $1.key }.map { JSON.Member($0.key, $0.value) }))
            case 11..<15:
                let peer = users[roll(users.count)]
                let kinds = ["request", "accept", "message", "read", "decline", "leave"]
                let kind = kinds[roll(kinds.count)]
                var command: [String: JSON] = ["commandId": .string(id()), "type": .string(kind), "peer": .string(peer), "timestamp": .int(t)]
                if kind == "request" || kind == "message" { command["text"] = "hi" }
                add("users/\(user)/dm/commands", .object(command.sorted { $0.key < $1.key }.map { JSON.Member($0.key, $0.value) }))
            case 15:
                let kinds = ["start", "pause", "resume", "stop"]
                add("users/\(user)/workouts/w\(roll(2))/control/watch",
                    .obj(["commandId": .string(id()), "type": .string(kinds[roll(kinds.count)]), "timestamp": .int(t)]))
            case 16:
                add("presence/\(user)/phone", .obj(["online": .bool(roll(2) == 0)]))
            case 17:
                // A DM command whose peer cannot be read, and a room topic whose roomId is invalid.
                out.append((t, "tandem/v1/users/\(user)/dm/commands", Array("{\"commandId\":\"\(id())\",\"type\":\"request\"".utf8)))
                add("rooms/bad room/events/\(user)", .obj(["eventId": .string(id()), "type": "create", "timestamp": .int(t)]))
            case 18:
                // Nobody's: an unknown topic.
                add("elsewhere/\(user)", .obj([:]))
            default:
                // A resend of an earlier message: a duplicate, answered by its partition.
                if let earlier = out.randomElement(using: &rng) { out.append((t, earlier.topic, earlier.payload)) }
            }
        }
        return out
    }
}
