import Testing
@testable import TandemClient
import TandemCore
import TestSupport

/// A watched room's snapshot topic is paused while its changes follow on, and read again
/// after a gap, when the room goes quiet, and after a reconnect (`TandemClient.RoomWatch`).
/// A test peer plays the coordinator on a real broker, publishing each batch's
/// RoomChanges and then its retained snapshot, as the contract says.
@Suite(.serialized) struct RoomSnapshotPauseTests {
    static let room = "pause-room"
    static let epoch = "e1"

    static func sticker(_ x: Double) -> Sticker {
        Sticker(id: "s1", image: "star", frame: Frame(x: x, y: 0, width: 10, height: 10), owner: nil,
                createdBy: "alice", updatedBy: "alice", updatedAt: 10)
    }

    /// One batch of the coordinator's: the room moved to `version`, its change, then its
    /// snapshot. Without `changes`, the snapshot alone (a change whose RoomChanges was lost).
    static func batch(_ peer: TestPeer, to version: Int64, changes: Bool = true) async throws {
        let topics = Topics()
        let moved = sticker(Double(version))
        if changes {
            let change = RoomChange(version: version, eventId: "ev-\(version)", userId: "alice", type: .update, stickerId: "s1", sticker: moved)
            let list = RoomChanges(roomId: room, epoch: epoch, fromVersion: version - 1, toVersion: version, changes: [change])
            try await peer.client.publish(topics.roomChanges(room: room), payload: list.serialized(), qos: .atLeastOnce)
        }
        let snapshot = RoomSnapshot(roomId: room, epoch: epoch, version: version, updatedAt: 10, stickers: [moved])
        try await peer.client.publish(topics.roomState(room: room), payload: snapshot.json().serialized(), qos: .atLeastOnce, retain: true)
    }

    /// Returns once the broker has taken everything bob sent before (a QoS 1 publish's
    /// acknowledgement comes after the packets before it are handled): a pause bob asked
    /// for is then in force, and the counts below are exact.
    static func settle(_ transport: MosquittoTransport) async throws {
        try await transport.publish("tandem-test/settle", payload: [], retain: false)
    }

    /// Waits for bob's replica at `version`; a timeout says where the replica stopped.
    static func reach(_ version: Int64, _ replicas: AsyncStream<RoomReplica>, _ bob: TandemClient,
                      timeout: Duration = .seconds(10)) async throws -> RoomReplica {
        do {
            return try await first(replicas, timeout: timeout) { $0.version == version }
        } catch {
            let held = await bob.replica(of: room)?.version
            let read = await bob.roomSnapshotsRead
            Issue.record("waited for version \(version): the replica is at \(held.map(String.init) ?? "nothing"), \(read) snapshots read")
            throw error
        }
    }

    /// Two changes in step from `from` pause the room; the twenty batches after them
    /// bring bob no snapshot.
    static func expectPausedInStep(
        from: Int64, _ coordinator: TestPeer, _ transport: MosquittoTransport, _ bob: TandemClient,
        _ replicas: AsyncStream<RoomReplica>, _ when: String
    ) async throws {
        try await batch(coordinator, to: from)
        try await batch(coordinator, to: from + 1)
        _ = try await reach(from + 1, replicas, bob)
        try await settle(transport)
        let paused = await bob.roomSnapshotsRead
        for version in (from + 2)...(from + 20) { try await batch(coordinator, to: version) }
        _ = try await reach(from + 20, replicas, bob)
        #expect(await bob.roomSnapshotsRead == paused, "snapshots read in step \(when)")
    }

    /// Bob, watching the room at version 1 and then in step through `through` (paused).
    static func inStep(_ broker: MosquittoBroker, through: Int64) async throws
        -> (TestPeer, MosquittoTransport, TandemClient, AsyncStream<RoomReplica>) {
        let coordinator = try await TestPeer.connect(broker: broker, user: "coordinator")
        let transport = try MosquittoTransport(host: broker.host, port: broker.port, user: "bob", clientId: "bob-phone")
        let bob = TandemClient(transport: transport, user: "bob", clientId: "bob-phone")
        try await bob.connect()
        try await batch(coordinator, to: 1, changes: false)
        let replicas = try await bob.room(room)
        _ = try await reach(1, replicas, bob)
        // The first change in step does not pause (a room changed now and then keeps its
        // snapshots); the second, right after, does.
        try await batch(coordinator, to: 2)
        try await batch(coordinator, to: 3)
        _ = try await reach(3, replicas, bob)
        try await settle(transport)
        if through > 3 {
            for version in Int64(4)...through { try await batch(coordinator, to: version) }
            _ = try await reach(through, replicas, bob)
        }
        return (coordinator, transport, bob, replicas)
    }

    @Test func aBusyRoomReadsNoSnapshotsAndAGapBringsOne() async throws {
        try await withBroker(.open) { broker in
            let (coordinator, transport, bob, replicas) = try await Self.inStep(broker, through: 3)
            let paused = await bob.roomSnapshotsRead
            #expect(paused <= 3, "snapshots read before the pause: \(paused)")
            for version in Int64(4)...21 { try await Self.batch(coordinator, to: version) }
            let inStep = try await Self.reach(21, replicas, bob)
            #expect(inStep.visibleSticker("s1")?.frame.x == 21)
            #expect(await bob.roomSnapshotsRead == paused, "snapshots read in step")

            // A gap: versions 22-30 were never heard (the snapshot at 30 is retained,
            // unseen); the change to 31 does not follow on, so bob subscribes again and
            // keeps the topic until a snapshot reaches 31 (the retained one may be 30).
            try await Self.batch(coordinator, to: 30, changes: false)
            try await Self.batch(coordinator, to: 31)
            let caughtUp = try await Self.reach(31, replicas, bob)
            #expect(caughtUp.visibleSticker("s1")?.frame.x == 31)
            let afterGap = await bob.roomSnapshotsRead
            #expect(afterGap > paused)

            // In step again: paused once more.
            try await Self.expectPausedInStep(from: 32, coordinator, transport, bob, replicas, "after the gap")

            await bob.close()
            await coordinator.close()
        }
    }

    /// A change whose RoomChanges never reached bob (the coordinator died between its
    /// commit and its publish, and the next term republished the room's snapshot alone)
    /// shows once the room has been quiet for a while: no later change is needed.
    @Test func aChangeLostWhilePausedShowsWhenTheRoomGoesQuiet() async throws {
        try await withBroker(.open) { broker in
            let (coordinator, _, bob, replicas) = try await Self.inStep(broker, through: 10)
            try await Self.batch(coordinator, to: 11, changes: false)
            let repaired = try await Self.reach(11, replicas, bob, timeout: .seconds(15))
            #expect(repaired.visibleSticker("s1")?.frame.x == 11)
            await bob.close()
            await coordinator.close()
        }
    }

    /// A reconnect subscribes the paused topic again: what changed while the client was
    /// away comes with the snapshot, and changes in step pause it again.
    @Test func aReconnectBringsTheSnapshotAndChangesPauseItAgain() async throws {
        try await withBroker(.open) { broker in
            let (coordinator, transport, bob, replicas) = try await Self.inStep(broker, through: 11)
            try await broker.restart()
            // The coordinator, back, publishes the room as it is now (it moved on while
            // the broker was away).
            let deadline = ContinuousClock.now + .seconds(20)
            while true {
                do {
                    try await Self.batch(coordinator, to: 40, changes: false)
                    break
                } catch where ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            let back = try await Self.reach(40, replicas, bob, timeout: .seconds(20))
            #expect(back.visibleSticker("s1")?.frame.x == 40)
            try await Self.expectPausedInStep(from: 41, coordinator, transport, bob, replicas, "after the reconnect")

            await bob.close()
            await coordinator.close()
        }
    }
}
