import Foundation
import Testing
import TandemCore
import TandemStore
import TestSupport

/// Issue 11 (1): the pipeline never waits on the disk, and nothing is published before
/// the commit that makes it true. A slow commit is injected for real: the test takes
/// the database's write lock with a connection of its own (`BEGIN IMMEDIATE`), so the
/// coordinator's next commit waits on SQLite's busy timeout until the test lets go.
@Suite struct CommitOrderingTests {
    @Test(.timeLimit(.minutes(1)))
    func nothingGoesOutBeforeItsCommitAndTheAnswersGivenMeanwhileWaitBehindIt() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            let topics = Topics()
            try await alice.edit(room: "slow", .edit("c1", "create", sticker: "s1", image: "a.png", frame: (0, 0, 10, 10)))
            #expect(try await alice.receipt("c1")["version"]?.int64Value == 1)
            _ = try await alice.roomState("slow", version: 1)

            // Another writer holds the write lock: the next batch's commit waits on it.
            let blocker = try SQLiteConnection(path: coordinator.databasePath)
            try blocker.execute("BEGIN IMMEDIATE")
            let aliceMark = alice.heardCount
            let bobMark = bob.heardCount
            try await alice.edit(room: "slow", .edit("u2", "update", sticker: "s1", frame: (5, 5, 10, 10)))
            // Past the reorder window: u2 is applied, its batch is committing (and stuck).
            try await Task.sleep(for: .milliseconds(300))
            // While it commits: a copy of u2 (its duplicate receipt carries the first copy's
            // outcome, not committed yet), bob's unreadable event for the room (its
            // rejection carries the room's version, 2 only once committed), and bob's own
            // edit, which waits for the next batch.
            try await alice.edit(room: "slow", .edit("u2", "update", sticker: "s1", frame: (5, 5, 10, 10)))
            try await bob.publishRaw(topics.roomEvents(room: "slow", user: "bob"), Array(#"{"eventId":"bad1","type":"update","stickerId":"s1"}"#.utf8))
            try await bob.edit(room: "slow", .edit("b3", "create", sticker: "s2", image: "b.png", frame: (1, 1, 1, 1)))
            // The pipeline takes them in, not waiting on the disk: a logbook query sent
            // after them is taken in too, and answered (from the read connection, which
            // the write lock does not stop) while the commit still waits...
            try await alice.publish(topics.requests(user: "alice"), .obj(["requestId": "q1", "type": "logbook"]))
            let answer = try await alice.waitFor(topics.responses(user: "alice"), timeout: .seconds(3)) { $0["requestId"] == "q1" }
            #expect(answer["workouts"] != nil, "\(answer.text)")
            // ...and it publishes nothing of the batch, nor the answers that depend on it.
            try await Task.sleep(for: .milliseconds(200))
            let leakedToAlice = alice.heard(from: aliceMark).filter { $0.topic.contains("/slow/") || $0.topic.hasSuffix("/receipts") }
            let leakedToBob = bob.heard(from: bobMark).filter { $0.topic.hasSuffix("/receipts") }
            #expect(leakedToAlice.isEmpty, "\(leakedToAlice.map { "\($0.topic) \($0.payloadString)" })")
            #expect(leakedToBob.isEmpty, "\(leakedToBob.map { "\($0.topic) \($0.payloadString)" })")

            try blocker.execute("COMMIT")
            blocker.close()

            let accepted = try await alice.receipt("u2")
            #expect(accepted["status"] == "accepted" && accepted["version"]?.int64Value == 2)
            let duplicate = try await alice.receipt("u2", count: 2)
            #expect(duplicate["status"] == "duplicate")
            #expect(duplicate["original"]?["status"] == "accepted" && duplicate["original"]?["version"]?.int64Value == 2)
            let rejected = try await bob.receipt("bad1")
            #expect(rejected["code"] == "invalid_payload" && rejected["version"]?.int64Value == 2, "\(rejected.text)")
            // bob is not a member of alice's room: refused in the next batch, at version 2.
            let b3 = try await bob.receipt("b3")
            #expect(b3["code"] == "not_member" && b3["version"]?.int64Value == 2, "\(b3.text)")

            // Order as alice heard it: the changes and the snapshot of version 2, then the
            // receipt that says "accepted, version 2", then the duplicate.
            let order = alice.heard(from: aliceMark).compactMap { message -> String? in
                let json = try? JSON.parse(message.payload)
                if message.topic == topics.roomChanges(room: "slow"), json?["toVersion"]?.int64Value == 2 { return "changes" }
                if message.topic == topics.roomState(room: "slow"), json?["version"]?.int64Value == 2 { return "state" }
                if message.topic == topics.receipts(user: "alice") { return json?["status"]?.stringValue }
                return nil
            }
            #expect(Array(order.prefix(4)) == ["changes", "state", "accepted", "duplicate"], "\(order)")
            await alice.close()
            await bob.close()
            #expect(await coordinator.stop() == 0)
        }
    }
}
