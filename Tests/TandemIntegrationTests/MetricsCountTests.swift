import Testing
import TandemCore
import TestSupport

/// Issue 14: every receipt the coordinator sends is counted once, by status and code.
/// Four rejections (invalid JSON, an invalid roomId in the topic, a lone surrogate, an
/// unknown sticker) were once counted as three.
@Suite struct MetricsCountTests {
    @Test(.timeLimit(.minutes(1)))
    func everyReceiptIsCountedOnceByStatusAndCode() async throws {
        try await withBroker(.open) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let topics = Topics()
            let room = topics.roomEvents(room: "counted", user: "alice")
            let t = nowMillis()
            try await alice.publishRaw(room, Array(#"{"eventId":"c1","type":"#.utf8))
            try await alice.publishRaw("tandem/v1/rooms/bad room!/events/alice", Array(#"{"eventId":"c2","type":"delete","stickerId":"s","timestamp":\#(t)}"#.utf8))
            try await alice.publishRaw(room, Array(#"{"eventId":"c3","type":"create","stickerId":"s","timestamp":\#(t),"image":"\ud800","frame":{"x":1,"y":1,"width":1,"height":1}}"#.utf8))
            try await alice.edit(room: "counted", .edit("c4", "acquire", sticker: "nowhere"))
            try await alice.edit(room: "counted", .edit("c5", "create", sticker: "s5", image: "a.png", frame: (1, 1, 1, 1)))
            for id in ["c1", "c2", "c3", "c4", "c5"] { _ = try await alice.receipt(id, timeout: .seconds(20)) }
            try await alice.edit(room: "counted", .edit("c5", "create", sticker: "s5", image: "a.png", frame: (1, 1, 1, 1)))
            _ = try await alice.receipt("c5", count: 2, timeout: .seconds(20))

            let metrics = try await alice.waitFor(topics.coordinatorMetrics, timeout: .seconds(20)) {
                ($0["receipts"]?["duplicate"]?.int64Value ?? 0) >= 1
            }
            #expect(metrics["receipts"]?["rejected"]?.int64Value == 4, "\(metrics.text)")
            #expect(metrics["receipts"]?["accepted"]?.int64Value == 1, "\(metrics.text)")
            #expect(metrics["receipts"]?["duplicate"]?.int64Value == 1, "\(metrics.text)")
            #expect(metrics["rejections"]?["invalid_payload"]?.int64Value == 3, "\(metrics.text)")
            #expect(metrics["rejections"]?["not_member"]?.int64Value == 1, "an acquire in a room that does not exist: \(metrics.text)")
            await alice.close()
            #expect(await coordinator.stop() == 0)
        }
    }
}
