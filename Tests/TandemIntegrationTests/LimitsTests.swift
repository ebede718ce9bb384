import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 7 (5): the limits, against the built coordinator with small flags.
@Suite(.serialized) struct LimitsTests {
    @Test func aBurstOverTheBucketIsRateLimitedAndMayBeResent() async throws {
        try await withRoomFixture(["--rate-limit", "5", "--rate-limit-burst", "10"]) { f in
            let topic = f.topics.roomEvents(room: "rl", user: "alice")
            let t = nowMillis()
            // 40 at once, without waiting for acknowledgements.
            for i in 0..<40 {
                try f.alice.client.enqueue(topic, payload: JSON.edit("e\(i)", "create", sticker: "s\(i)", at: t + Int64(i), image: "x.png", frame: (0, 0, 1, 1)).serialized())
            }
            for i in 0..<40 { try await f.alice.receipt("e\(i)", timeout: .seconds(20)) }
            let receipts = (0..<40).map { f.alice.receipts(id: "e\($0)")[0] }
            let limited = receipts.filter { $0["code"] == "rate_limited" }
            let accepted = receipts.filter { $0["status"] == "accepted" }
            #expect(accepted.count >= 10 && accepted.count < 20, "\(accepted.count) accepted")
            #expect(limited.count == 40 - accepted.count)
            #expect(limited.allSatisfy { $0["status"] == "rejected" && $0["kind"] == "room" })

            // A rate-limited id is not remembered: resent after a pause, it is accepted.
            let first = try #require(limited.first?["id"]?.stringValue)
            let index = try #require(Int(first.dropFirst()))
            try await Task.sleep(for: .seconds(1))
            try await f.alice.edit(room: "rl", .edit(first, "create", sticker: "s\(index)", at: t + Int64(index), image: "x.png", frame: (0, 0, 1, 1)))
            #expect(try await f.alice.receipt(first, count: 2)["status"] == "accepted")
        }
    }

    @Test func aRoomHoldsNoMoreThanItsStickerCap() async throws {
        try await withRoomFixture(["--max-stickers-per-room", "3"]) { f in
            let v0 = try await f.share("cap")
            let t = nowMillis()
            for i in 0..<3 {
                try await f.alice.edit(room: "cap", .edit("c\(i)", "create", sticker: "s\(i)", at: t + Int64(i), image: "x.png", frame: (0, 0, 1, 1)))
                expectAccepted(try await f.alice.receipt("c\(i)"), version: v0 + Int64(i + 1))
            }
            try await f.bob.edit(room: "cap", .edit("b-over", "create", sticker: "s3", at: t + 10, image: "x.png", frame: (0, 0, 1, 1)))
            expectRejected(try await f.bob.receipt("b-over"), code: "room_full", version: v0 + 3)
            // Another room is not affected; a delete makes room again.
            try await f.bob.edit(room: "other", .edit("b-other", "create", sticker: "s3", at: t + 11, image: "x.png", frame: (0, 0, 1, 1)))
            expectAccepted(try await f.bob.receipt("b-other"), version: 1)
            try await f.alice.edit(room: "cap", .edit("a-del", "delete", sticker: "s0", at: t + 12))
            expectAccepted(try await f.alice.receipt("a-del"), version: v0 + 4)
            try await f.bob.edit(room: "cap", .edit("b-again", "create", sticker: "s3", at: t + 13, image: "x.png", frame: (0, 0, 1, 1)))
            expectAccepted(try await f.bob.receipt("b-again"), version: v0 + 5)
        }
    }

    @Test func aUserTakesPartInNoMoreThanItsConversationCap() async throws {
        try await withRoomFixture(["--max-conversations-per-user", "1"]) { f in
            let t = nowMillis()
            try await f.alice.dm(.obj(["commandId": "r1", "type": "request", "peer": "bob", "timestamp": .int(t)]))
            #expect(try await f.alice.receipt("r1")["status"] == "accepted")
            try await f.alice.dm(.obj(["commandId": "r2", "type": "request", "peer": "carol", "timestamp": .int(t + 1)]))
            let refused = try await f.alice.receipt("r2")
            #expect(refused["status"] == "rejected")
            #expect(refused["code"] == "rate_limited", "\(refused.text)")
            // The peer's count counts too: carol has none, but bob is at his cap.
            try await f.carol.dm(.obj(["commandId": "c1", "type": "request", "peer": "bob", "timestamp": .int(t + 2)]))
            #expect(try await f.carol.receipt("c1")["code"] == "rate_limited")
        }
    }

    /// One client floods a room far over its rate; another client's events in the same
    /// room still go through, each answered promptly.
    @Test(.timeLimit(.minutes(2)))
    func aFloodingClientDoesNotStarveAnother() async throws {
        try await withRoomFixture(["--rate-limit", "50", "--rate-limit-burst", "50"]) { f in
            let room = "flood"
            let topic = f.topics.roomEvents(room: room, user: "alice")
            let flood = Task {
                var sent = 0
                let end = ContinuousClock.now + .seconds(4)
                while ContinuousClock.now < end {
                    for _ in 0..<20 {
                        let t = nowMillis()
                        try? f.alice.client.enqueue(topic, payload: JSON.edit("f\(sent)", "update", sticker: "nothing-\(sent % 7)", at: t, frame: (0, 0, 1, 1)).serialized())
                        sent += 1
                    }
                    try await Task.sleep(for: .milliseconds(5))
                }
                return sent
            }
            try await Task.sleep(for: .milliseconds(300))
            var latencies: [Duration] = []
            for i in 0..<15 {
                let started = ContinuousClock.now
                try await f.bob.edit(room: room, .edit("b\(i)", "create", sticker: "b\(i)", image: "b.png", frame: (Double(i), 0, 1, 1)))
                let receipt = try await f.bob.receipt("b\(i)", timeout: .seconds(10))
                latencies.append(ContinuousClock.now - started)
                #expect(receipt["status"] == "accepted", "\(receipt.text)")
                try await Task.sleep(for: .milliseconds(150))
            }
            let sent = try await flood.value
            try await Task.sleep(for: .seconds(1))
            let floodReceipts = f.alice.receipts
            let limited = floodReceipts.count(where: { $0["code"] == "rate_limited" })
            print("LimitsTests: alice flooded \(sent) events (\(floodReceipts.count) receipts so far, \(limited) rate_limited); bob's 15 receipts took at most \(latencies.max()!)")
            #expect(limited > sent / 2)
            #expect(latencies.max()! < .seconds(8))
        }
    }

    /// Queries (DM history) are answered from the store on the pipeline's task: they cost
    /// a token like events, so a client flooding them is refused and does not hold up
    /// another client's events.
    @Test(.timeLimit(.minutes(2)))
    func aFloodOfQueriesDoesNotStarveEvents() async throws {
        try await withRoomFixture(["--rate-limit", "50", "--rate-limit-burst", "50"]) { f in
            // Some history to read.
            let t = nowMillis()
            try await f.alice.dm(.obj(["commandId": "q-req", "type": "request", "peer": "bob", "timestamp": .int(t), "text": "hi"]))
            try await f.alice.receipt("q-req")
            let topic = f.topics.requests(user: "alice")
            let flood = Task {
                var sent = 0
                let end = ContinuousClock.now + .seconds(4)
                while ContinuousClock.now < end {
                    for _ in 0..<20 {
                        try? f.alice.client.enqueue(topic, payload: JSON.obj([
                            "requestId": .string("q\(sent)"), "type": "dmHistory", "peer": "bob", "limit": 200,
                        ]).serialized())
                        sent += 1
                    }
                    try await Task.sleep(for: .milliseconds(5))
                }
                return sent
            }
            try await Task.sleep(for: .milliseconds(300))
            var latencies: [Duration] = []
            for i in 0..<15 {
                let started = ContinuousClock.now
                try await f.bob.edit(room: "q", .edit("b\(i)", "create", sticker: "b\(i)", image: "b.png", frame: (Double(i), 0, 1, 1)))
                #expect(try await f.bob.receipt("b\(i)", timeout: .seconds(10))["status"] == "accepted")
                latencies.append(ContinuousClock.now - started)
                try await Task.sleep(for: .milliseconds(150))
            }
            let sent = try await flood.value
            let responses = f.alice.all(on: f.topics.responses(user: "alice"))
            let limited = responses.count(where: { $0["error"]?["code"] == "rate_limited" })
            print("LimitsTests: alice flooded \(sent) queries (\(responses.count) responses so far, \(limited) rate_limited); bob's 15 receipts took at most \(latencies.max()!)")
            #expect(latencies.max()! < .seconds(8))
            #expect(limited > sent / 2)
            #expect(responses.allSatisfy { $0["error"] == nil || $0["error"]?["code"] == "rate_limited" })
        }
    }

    /// Issue 11: queries are answered from a read connection of their own, beside the
    /// pipeline. With no rate limit, alice floods 3,000 requests for a 200-message
    /// history; bob's edit, sent after the whole flood, is answered while alice's
    /// responses are still coming (answered in the pipeline, it waited behind all of them).
    @Test(.timeLimit(.minutes(3)))
    func queriesAreReadBesideThePipeline() async throws {
        try await withRoomFixture(["--rate-limit", "0"]) { f in
            let t = nowMillis()
            try await f.alice.dm(.obj(["commandId": "h-req", "type": "request", "peer": "bob", "timestamp": .int(t), "text": "hi"]))
            try await f.alice.receipt("h-req")
            try await f.bob.dm(.obj(["commandId": "h-acc", "type": "accept", "peer": "alice", "timestamp": .int(t + 1)]))
            try await f.bob.receipt("h-acc")
            let text = String(repeating: "m", count: 100)
            for i in 0..<200 {
                try f.alice.client.enqueue(f.topics.dmCommands(user: "alice"), payload: JSON.obj([
                    "commandId": .string("h\(i)"), "type": "message", "peer": "bob", "timestamp": .int(t + 2 + Int64(i)), "text": .string(text),
                ]).serialized())
            }
            try await f.alice.receipt("h199", timeout: .seconds(30))

            let total = 3_000
            let requests = f.topics.requests(user: "alice")
            for i in 0..<total {
                try f.alice.client.enqueue(requests, payload: JSON.obj([
                    "requestId": .string("f\(i)"), "type": "dmHistory", "peer": "bob", "limit": 200,
                ]).serialized())
            }
            try await f.bob.edit(room: "beside", .edit("after-flood", "create", sticker: "x", image: "x.png", frame: (1, 1, 1, 1)))
            #expect(try await f.bob.receipt("after-flood", timeout: .seconds(60))["status"] == "accepted")
            let answeredBefore = f.alice.all(on: f.topics.responses(user: "alice")).count
            let deadline = ContinuousClock.now + .seconds(90)
            while f.alice.all(on: f.topics.responses(user: "alice")).count < total, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            let responses = f.alice.all(on: f.topics.responses(user: "alice"))
            print("LimitsTests: bob's receipt came when \(answeredBefore) of \(total) history pages were out")
            #expect(answeredBefore < total, "bob's receipt waited for every query")
            #expect(responses.count == total)
            let fullPages = responses.count { response in
                guard response["error"] == nil, case .array(let messages)? = response["messages"] else { return false }
                return messages.count == 200
            }
            #expect(fullPages == total, "\(responses.first?.text ?? "")")
        }
    }
}
