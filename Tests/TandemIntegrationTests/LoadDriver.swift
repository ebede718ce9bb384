import Foundation
import Testing
import TandemCore
import TandemMQTT
import TandemPostgres
import TandemStore
import Logging
import TestSupport

/// Steady load from one test client, the way the agent behaves: a stream of room edit
/// events (and, with a DM peer, DM messages) with unique ids; every one without a
/// receipt after `resendAfter` is published again with the same id and payload, until it
/// has one. Used by the crash, broker-restart and limits tests.
struct LoadPlan: Sendable {
    var room: String
    /// Stickers every user may touch (created before the load starts).
    var shared: [String]
    /// How long new events are generated; a drain phase follows.
    var duration: Duration
    /// Between two new events.
    var interval: Duration = .milliseconds(40)
    var resendAfter: Duration = .seconds(2)
    /// Where DM messages go; nil: room events only.
    var dmPeer: String?
    /// Whether some events are workout controls (start, pause, resume, stop of one
    /// workout after another, from the phone).
    var workouts = false
    /// How long the drain phase may take at most.
    var drainTimeout: Duration = .seconds(40)
    var seed: UInt64
}

/// What one client sent and heard.
struct LoadReport: Sendable {
    var user: String
    /// id -> how many times it was published (successfully handed to the broker or not).
    var sends: [String: Int] = [:]
    /// id -> "room", "dm" or "workout".
    var kinds: [String: String] = [:]
    /// id -> every receipt heard for it, in order.
    var receipts: [String: [JSON]] = [:]
    var publishFailures = 0
    /// id -> publishes of it that failed (the connection dropped before the PUBACK): the
    /// message may still have reached the broker, and libmosquitto resends it on reconnect.
    var failedPublishes: [String: Int] = [:]
    /// Events still without any receipt when the drain phase gave up.
    var unanswered: [String] = []

    var eventsSent: Int { sends.count }
    var publishes: Int { sends.values.reduce(0, +) }

    /// The non-duplicate outcomes (accepted or rejected) heard for `id`.
    func outcomes(_ id: String) -> [JSON] {
        (receipts[id] ?? []).filter { $0["status"]?.stringValue != "duplicate" }
    }

    func duplicateReceipts(_ id: String) -> [JSON] {
        (receipts[id] ?? []).filter { $0["status"]?.stringValue == "duplicate" }
    }

    func duplicates(_ id: String) -> Int {
        (receipts[id] ?? []).count(where: { $0["status"]?.stringValue == "duplicate" })
    }
}

/// Generates and sends `plan`'s load as `peer.user`; returns when every event has a
/// receipt or the drain timeout ran out.
func driveLoad(_ peer: TestPeer, plan: LoadPlan) async -> LoadReport {
    let user = peer.user
    let topics = peer.topics
    var rng = TestRandom(seed: plan.seed)
    var report = LoadReport(user: user)
    var outstanding: [String: (topic: String, payload: JSON, last: ContinuousClock.Instant)] = [:]
    var cursor = peer.heardCount
    var own: [String] = []
    var counter = 0
    let clock = ContinuousClock()
    let receiptsTopic = topics.receipts(user: user)

    func send(_ id: String, topic: String, payload: JSON) async {
        report.sends[id, default: 0] += 1
        outstanding[id] = (topic, payload, clock.now)
        do {
            try await peer.publish(topic, payload)
        } catch {
            report.publishFailures += 1
            report.failedPublishes[id, default: 0] += 1
        }
    }

    func hear() {
        let new = peer.heard(from: cursor)
        cursor += new.count
        for message in new where message.topic == receiptsTopic {
            guard let receipt = try? JSON.parse(message.payload), let id = receipt["id"]?.stringValue else { continue }
            report.receipts[id, default: []].append(receipt)
            // rate_limited ids are not remembered: the client must send them again.
            if receipt["code"]?.stringValue != "rate_limited" { outstanding.removeValue(forKey: id) }
        }
    }

    func resendOverdue() async {
        let now = clock.now
        for (id, entry) in outstanding.sorted(by: { $0.key < $1.key }) where now - entry.last >= plan.resendAfter {
            await send(id, topic: entry.topic, payload: entry.payload)
        }
    }

    var workoutNumber = 0
    var workoutStep = 0
    func nextEvent() -> (String, String, JSON, String) {
        counter += 1
        if plan.workouts, rng.below(8) == 0 {
            let kinds = ["start", "pause", "resume", "stop"]
            let id = "\(user)-w\(counter)"
            let command = JSON.obj([
                "commandId": .string(id), "type": .string(kinds[workoutStep]), "timestamp": .int(nowMillis()),
                "mode": "mirrored",
            ])
            let topic = topics.workoutControl(user: user, workout: "\(user)-run\(workoutNumber)", device: .phone)
            workoutStep += 1
            if workoutStep == kinds.count {
                workoutStep = 0
                workoutNumber += 1
            }
            return (id, topic, command, "workout")
        }
        let frame = (Double(rng.below(1000)), Double(rng.below(1000)), Double(1 + rng.below(100)), Double(1 + rng.below(100)))
        if let dmPeer = plan.dmPeer, rng.below(6) == 0 {
            let id = "\(user)-d\(counter)"
            let command = JSON.obj([
                "commandId": .string(id), "type": "message", "peer": .string(dmPeer),
                "timestamp": .int(nowMillis()), "text": .string("message \(counter) from \(user)"),
            ])
            return (id, topics.dmCommands(user: user), command, "dm")
        }
        let id = "\(user)-e\(counter)"
        let anySticker = (own + plan.shared).isEmpty ? nil : (own + plan.shared)[rng.below((own + plan.shared).count)]
        let event: JSON
        switch (rng.below(20), anySticker) {
        case (0..<5, _), (_, nil):
            let sticker = "\(user)-s\(counter)"
            own.append(sticker)
            event = .edit(id, "create", sticker: sticker, image: "img-\(counter).png", frame: frame)
        case (5..<12, let sticker?):
            event = .edit(id, "update", sticker: sticker, frame: frame)
        case (12..<15, let sticker?):
            event = .edit(id, "acquire", sticker: sticker)
        case (15..<19, let sticker?):
            event = .edit(id, "release", sticker: sticker)
        case (_, let sticker?):
            event = .edit(id, "delete", sticker: sticker)
        }
        return (id, topics.roomEvents(room: plan.room, user: user), event, "room")
    }

    let end = clock.now + plan.duration
    while clock.now < end {
        let (id, topic, payload, kind) = nextEvent()
        report.kinds[id] = kind
        await send(id, topic: topic, payload: payload)
        hear()
        await resendOverdue()
        try? await Task.sleep(for: plan.interval)
    }
    let drainEnd = clock.now + plan.drainTimeout
    while !outstanding.isEmpty && clock.now < drainEnd {
        try? await Task.sleep(for: .milliseconds(50))
        hear()
        await resendOverdue()
    }
    // A last look: receipts of the final resends may still be on their way.
    try? await Task.sleep(for: .milliseconds(300))
    hear()
    report.unanswered = outstanding.keys.sorted()
    return report
}

/// Checks what a load run left behind, against the coordinator's own record:
///
/// - every event was processed exactly once: one row in the event log;
/// - each client heard at most one non-duplicate receipt per event, agreeing with the
///   log; an event answered only by `duplicate` (its receipt died with a killed
///   process) learned the first copy's outcome from the duplicate's `original`;
/// - the room's retained snapshot equals a replay of the accepted events, in version
///   order, through the pure `RoomState`; the DM conversation holds exactly the
///   accepted messages, in order; each workout's retained snapshot has the version and
///   status its accepted controls give.
///
/// `stop` stops the coordinator(s) cleanly; `eventLog` then reads the whole log.
func verifyLoad(
    reports: [LoadReport], peers: [TestPeer], room: String, broker: MosquittoBroker, label: String,
    stop: () async -> Void, eventLog: () async throws -> [EventLogRow]
) async throws {
    let topics = Topics()
    for report in reports {
        #expect(report.unanswered.isEmpty, "\(report.user): no receipt at all for \(report.unanswered.prefix(20))")
    }

    // The retained state as a client connecting now sees it.
    let late = try await TestPeer.connect(broker: broker, user: "alice")
    let snapshot = try await late.waitFor(topics.roomState(room: room), timeout: .seconds(20))
    // Conversation snapshots are paced (a second at most behind the changes): wait
    // for the one that carries the last version any receipt told of.
    let dmVersion = peers.flatMap(\.receipts).filter { $0["kind"]?.stringValue == "dm" }.compactMap { $0["version"]?.int64Value }.max() ?? 0
    let conversation = try await late.waitFor(topics.conversation(user: "alice", peer: "bob"), timeout: .seconds(20)) {
        ($0["version"]?.int64Value ?? 0) >= dmVersion
    }
    await late.close()
    for peer in peers { await peer.close() }

    // The authoritative record: stop the coordinator cleanly and read its log.
    await stop()
    let log = try await eventLog()

    // Workouts: each one's retained snapshot, as a client connecting now sees it (the
    // broker keeps them after the coordinator stopped). Waited for until every workout
    // the log has accepted controls for has one, or 10 s: a fixed wait once fell short
    // on a machine busy with the whole suite.
    var workoutSnapshots: [String: JSON] = [:]
    var expectedWorkouts: [String: [String]] = [:]
    for target in Set(log.filter { $0.kind == .workout && $0.status == .accepted }.map(\.target)) {
        let parts = target.split(separator: "/").map(String.init)
        expectedWorkouts[parts[0], default: []].append(topics.workoutState(user: parts[0], workout: parts[1]))
    }
    for (user, expected) in expectedWorkouts.sorted(by: { $0.key < $1.key }) {
        let owner = try await TestPeer.connect(broker: broker, user: user)
        let deadline = ContinuousClock.now + .seconds(10)
        repeat {
            try await Task.sleep(for: .milliseconds(100))
            for message in owner.heard(from: 0) where message.topic.hasSuffix("/state") && message.topic.contains("/workouts/") {
                if let json = try? JSON.parse(message.payload) { workoutSnapshots[message.topic] = json }
            }
        } while !expected.allSatisfy({ workoutSnapshots[$0] != nil }) && ContinuousClock.now < deadline
        await owner.close()
    }
    var logged: [String: [EventLogRow]] = [:]
    for row in log { logged["\(row.userId)/\(row.id)", default: []].append(row) }

    var sent = 0, publishes = 0, answered = 0, duplicates = 0, receiptLost = 0, accepted = 0, rejected = 0
    var redelivered = 0
    for report in reports {
        sent += report.eventsSent
        publishes += report.publishes
        for (id, copies) in report.sends {
            let key = "\(report.user)/\(id)"
            let rows = logged[key] ?? []
            #expect(rows.count == 1, "\(key): processed \(rows.count) times")
            let outcomes = report.outcomes(id)
            let dups = report.duplicates(id)
            duplicates += dups
            #expect(outcomes.count <= 1, "\(key): \(outcomes.count) outcomes: \(outcomes.map(\.text))")
            // More duplicates than resends: the transport delivered a copy again.
            if dups > copies - 1 { redelivered += dups - (copies - 1) }
            #expect(dups <= 2 * copies, "\(key): \(dups) duplicate receipts for \(copies) copies sent")
            if let outcome = outcomes.first {
                answered += 1
                if let row = rows.first {
                    #expect(outcome["status"]?.stringValue == row.status.rawValue, "\(key)")
                    #expect(outcome["version"]?.int64Value == row.version, "\(key)")
                    #expect(outcome["code"]?.stringValue == row.code?.rawValue, "\(key)")
                }
                if outcome["status"]?.stringValue == "accepted" { accepted += 1 } else { rejected += 1 }
            } else if dups > 0 {
                answered += 1
                receiptLost += 1
                // The lost receipt's outcome still reaches the client: a duplicate
                // of a committed id carries the first copy's outcome.
                let recovered = report.duplicateReceipts(id).compactMap { $0["original"] }.first
                if let row = rows.first {
                    #expect(recovered?["status"]?.stringValue == row.status.rawValue, "\(key): \(report.duplicateReceipts(id).map(\.text))")
                    #expect(recovered?["version"]?.int64Value == row.version, "\(key)")
                }
            }
        }
    }

    // Replay the accepted room events in version order through the pure rules.
    let roomRows = log.filter { $0.kind == .room && $0.target == room && $0.status == .accepted }
        .sorted { ($0.version ?? 0) < ($1.version ?? 0) }
    var replay = RoomState(roomId: room)
    for row in roomRows {
        let event = try EditEvent.decode(try #require(row.payload))
        let outcome = replay.apply(event, from: row.userId, now: row.at, lease: 3_600_000, rules: MembershipRules.Context()).outcome
        #expect(outcome.isAccepted && outcome.version == row.version, "replay of \(row.userId)/\(row.id) at v\(row.version ?? -1): \(outcome)")
    }
    #expect(snapshot["version"]?.int64Value == replay.version)
    #expect(memberList(snapshot) == replay.members.list.map { "\($0.userId)/\($0.role.rawValue)" })
    let live = stickers(snapshot)
    #expect(live.compactMap { $0["id"]?.stringValue } == replay.stickers.map(\.id))
    for (got, want) in zip(live, replay.stickers) {
        #expect(frame(snapshot, want.id) == [want.frame.x, want.frame.y, want.frame.width, want.frame.height], "\(want.id)")
        #expect(got["owner"]?.stringValue == want.owner, "\(want.id)")
    }

    // The conversation's snapshot holds exactly the latest accepted messages, in version
    // order (setup messages aside); the database's history holds them all.
    let acceptedMessages = try log.filter { $0.kind == .dm && $0.status == .accepted }
        .sorted { ($0.version ?? 0) < ($1.version ?? 0) }
        .compactMap { row -> String? in
            let command = try DMCommand.decode(try #require(row.payload))
            return command.type == .message ? command.commandId : nil
        }
    var messageIds: [String] = []
    var window = 0
    if case .array(let messages)? = conversation["messages"] {
        window = messages.count
        messageIds = messages.compactMap { $0["id"]?.stringValue }.filter { !$0.hasPrefix("setup") }
    }
    #expect(window <= Conversation.snapshotSize)
    #expect(messageIds == Array(acceptedMessages.suffix(messageIds.count)))
    if acceptedMessages.count >= Conversation.snapshotSize {
        #expect(messageIds.count == min(window, Conversation.snapshotSize))
    }

    // Each workout's snapshot: one version per accepted control, the status its last one left.
    let controls = try log.filter { $0.kind == .workout && $0.status == .accepted }
        .sorted { ($0.version ?? 0) < ($1.version ?? 0) }
        .map { row -> (target: String, type: WorkoutControl.Kind) in
            (row.target, try WorkoutControl.decode(try #require(row.payload)).type)
        }
    var workoutsChecked = 0
    for (target, rows) in Dictionary(grouping: controls, by: \.target) {
        let parts = target.split(separator: "/")
        let topic = Topics().workoutState(user: String(parts[0]), workout: String(parts[1]))
        let snapshot = try #require(workoutSnapshots[topic], "no retained snapshot of workout \(target)")
        #expect(snapshot["version"]?.int64Value == Int64(rows.count), "\(target): \(snapshot.text)")
        let status: String = switch rows.last!.type {
        case .start, .resume: "running"
        case .pause: "paused"
        case .stop: "finished"
        }
        #expect(snapshot["status"]?.stringValue == status, "\(target): \(snapshot.text)")
        workoutsChecked += 1
    }

    print("""
        load [\(label)]: \(sent) events sent (\(publishes) publishes incl. resends), \
        \(answered) answered (\(accepted) accepted, \(rejected) rejected, \(receiptLost) answered only by \
        'duplicate' after their receipt died with the process), \(duplicates) duplicate receipts \
        (\(redelivered) for QoS 1 redeliveries rather than resends), \
        room at version \(replay.version) with \(replay.stickers.count) stickers, \(acceptedMessages.count) DM messages, \
        \(workoutsChecked) workouts
        """)
    #expect(answered == sent)
}

/// SplitMix64: a seeded generator so a failing run can be replayed.
struct TestRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}

/// Every row of the coordinator's event log (read with the coordinator stopped).
func readEventLog(_ path: String) async throws -> [EventLogRow] {
    try await readEventLog(from: try SQLiteStore.open(path: path))
}

/// Every row of the event log of the PostgreSQL database at `url`.
func readEventLog(postgres url: String) async throws -> [EventLogRow] {
    try await readEventLog(from: try await PostgresStore.openReader(url: PostgresURL(parsing: url), logger: Logger(label: "test")))
}

func readEventLog(from store: any CoordinatorStore) async throws -> [EventLogRow] {
    var rows: [EventLogRow] = []
    while true {
        let page = try await store.eventLog(after: rows.last?.seq ?? 0, limit: 1_000)
        if page.isEmpty { break }
        rows += page
    }
    await store.close()
    return rows
}
