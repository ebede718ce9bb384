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

        // The filter on each session's thread leaves exactly what the engine would have
        // left, and nothing else: the same answers and snapshots.
        for k in 0..<count {
            let filtered = Self.run(messages, partitioning: partitioning, partition: k, filtered: true)
            #expect(filtered.receipts == parts[k].receipts)
            #expect(filtered.retained == parts[k].retained)
            #expect(filtered.skipped > 0)
            #expect(filtered.skipped + filtered.metrics.messagesElsewhere == parts[k].metrics.messagesElsewhere)
            #expect(filtered.metrics.messagesIn == parts[k].metrics.messagesIn)
        }
    }

    /// A restart gives each partition's engine its own rooms, conversations and workouts
    /// from the one store all partitions commit to, and nothing of the others: together
    /// they republish exactly what one engine recovered from the same rows republishes,
    /// each snapshot once.
    @Test(arguments: [2, 3])
    func aRestartGivesEachPartitionItsOwnAndNothingElse(_ count: Int) async throws {
        // One engine takes the scenario; its commits are the store.
        var engine = Engine(configuration: EngineConfiguration(), epoch: "e0", now: Self.t0)
        var entities: [String: EntityRow] = [:]
        var members: [String: [RoomMemberRow]] = [:]
        var messages: [String: [DMMessageRow]] = [:]
        func keep(_ batch: StoreBatch) {
            for row in batch.entities { entities[row.kind + "/" + row.key] = row }
            for room in batch.roomMembers { members[room.roomId] = room.members }
            for message in batch.messages { messages[message.conversation, default: []].append(message) }
        }
        let scenario = Self.scenario(seed: 11)
        for m in scenario {
            keep(engine.step(now: m.at).batch)
            _ = engine.ingest(topic: m.topic, payload: m.payload, now: m.at)
        }
        let end = (scenario.last?.at ?? Self.t0) + 60_000
        keep(engine.step(now: end).batch)
        keep(engine.flush(at: Engine.Now(end)).batch)

        var recovered = Engine.Recovered()
        let rows = entities.values.sorted { $0.key < $1.key }
        recovered.rooms = try await Engine.parseRooms(rows.filter { $0.kind == EntityKind.room }, members: members.values.flatMap { $0 })
        recovered.conversations = rows.filter { $0.kind == EntityKind.conversation }.map {
            StoredConversation(row: $0, latestMessages: Array((messages[$0.key] ?? []).suffix(Conversation.windowSize)))
        }
        recovered.workouts = rows.filter { $0.kind == EntityKind.workout }
        #expect(recovered.rooms.live.count + recovered.rooms.packed.count > 10 && recovered.conversations.count > 3 && !recovered.workouts.isEmpty)

        func republish(_ configuration: EngineConfiguration) throws -> (retained: [String: [UInt8]], gauges: Metrics.Gauges) {
            var e = try Engine(configuration: configuration, epoch: "e0", recovered: recovered, now: end)
            e.startRepublishing(now: end)
            var retained: [String: [UInt8]] = [:]
            var now = end
            while e.isRepublishing {
                for p in e.step(now: now).publications where p.retain {
                    #expect(retained[p.topic] == nil, "\(p.topic) republished twice")
                    retained[p.topic] = p.payload
                }
                now += 100
            }
            return (retained, e.gauges)
        }
        let single = try republish(EngineConfiguration())
        var union: [String: [UInt8]] = [:]
        var gauges: [Metrics.Gauges] = []
        for k in 0..<count {
            var c = EngineConfiguration()
            c.partitioning = try #require(Partitioning(count: count))
            c.partition = k
            let part = try republish(c)
            #expect(part.gauges.rooms > 0, "partition \(k) of \(count) holds rooms")
            for (topic, payload) in part.retained {
                #expect(union[topic] == nil, "\(topic) is held by two partitions")
                union[topic] = payload
            }
            gauges.append(part.gauges)
        }
        #expect(union == single.retained)
        let summed = Metrics.Gauges.summed(gauges)
        #expect(summed.rooms == single.gauges.rooms)
        #expect(summed.conversations == single.gauges.conversations)
        #expect(summed.workouts == single.gauges.workouts)
    }

    /// `coordinator/metrics` of several partitions: the sums, and each one's own figures.
    @Test func metricsOfSeveralPartitionsAreSummedAndListed() throws {
        let partitioning = try #require(Partitioning(count: 3))
        let messages = Self.scenario(seed: 5)
        let parts = (0..<3).map { k -> Metrics.Partition in
            let outcome = Self.run(messages, partitioning: partitioning, partition: k)
            var g = Metrics.Gauges()
            g.rooms = k + 1
            return Metrics.Partition(partition: k, metrics: outcome.metrics, gauges: g)
        }
        let single = Self.run(messages, partitioning: .single).metrics
        let sum = Metrics.summed(parts.map(\.metrics))
        #expect(sum.messagesIn == single.messagesIn)
        #expect(sum.accepted == single.accepted && sum.rejected == single.rejected && sum.duplicates == single.duplicates)
        #expect(sum.rejectionsByCode == single.rejectionsByCode)
        #expect(sum.receiptsByKind == single.receiptsByKind)
        #expect(sum.messagesInByKind == single.messagesInByKind)
        let json = try JSON.parse(Metrics.publication(topics: Topics(), partitions: parts, uptimeSeconds: 1).payload)
        #expect(json["messagesIn"]?.int64Value == Int64(single.messagesIn))
        #expect(json["rooms"]?.int64Value == 6)
        #expect(json["partitions"]?.arrayValue?.compactMap { $0["rooms"]?.int64Value } == [1, 2, 3])
        // One partition: the same publication as before partitions existed.
        let one = Metrics.publication(topics: Topics(), partitions: [Metrics.Partition(partition: 0, metrics: single, gauges: .init())], uptimeSeconds: 1)
        var alone = Engine(configuration: EngineConfiguration(), epoch: "e0", now: Self.t0)
        alone.metrics = single
        #expect(one.payload == alone.metricsPublication(uptimeSeconds: 1).payload)
    }

    struct Outcome {
        var receipts: [String] = []
        var retained: [String: [UInt8]] = [:]
        var metrics = Metrics()
        var skipped = 0
    }

    /// `filtered`: a ``PartitionFilter`` in front, as each partition's MQTT session has;
    /// what it leaves is counted in `skipped`.
    static func run(_ messages: [(at: Millis, topic: String, payload: [UInt8])], partitioning: Partitioning, partition: Int = 0, filtered: Bool = false) -> Outcome {
        var c = EngineConfiguration()
        c.partitioning = partitioning
        c.partition = partition
        var engine = Engine(configuration: c, epoch: "e0", now: t0)
        let filter = PartitionFilter(configuration: c)
        var outcome = Outcome()
        func take(_ publications: [Publication]) {
            for p in publications {
                if p.topic.hasSuffix("/receipts") { outcome.receipts.append(p.topic + " " + String(decoding: p.payload, as: UTF8.self)) }
                if p.retain { outcome.retained[p.topic] = p.payload }
            }
        }
        for m in messages {
            take(engine.step(now: m.at).publications)
            if filtered, !filter.keeps(topic: m.topic, payload: m.payload) {
                outcome.skipped += 1
                continue
            }
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
