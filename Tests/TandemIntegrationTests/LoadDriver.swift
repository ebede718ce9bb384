import Foundation
import TandemCore
import TandemMQTT
import TandemStore
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
    /// How long the drain phase may take at most.
    var drainTimeout: Duration = .seconds(40)
    var seed: UInt64
}

/// What one client sent and heard.
struct LoadReport: Sendable {
    var user: String
    /// id -> how many times it was published (successfully handed to the broker or not).
    var sends: [String: Int] = [:]
    /// id -> "room" or "dm".
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

    func nextEvent() -> (String, String, JSON, String) {
        counter += 1
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
    let store = try TandemStore.open(path: path)
    var rows: [EventLogRow] = []
    while true {
        let page = try await store.eventLog(after: rows.last?.seq ?? 0, limit: 1_000)
        if page.isEmpty { break }
        rows += page
    }
    await store.close()
    return rows
}
