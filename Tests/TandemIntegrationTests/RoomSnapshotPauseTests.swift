import Testing
@testable import TandemClient
import TandemCore
import TestSupport

/// A watched room's snapshots are taken only when needed (`TandemClient.RoomWatch`): the
/// first, then after a gap. A test peer plays the coordinator on a real broker,
/// publishing each batch's RoomChanges and then its retained snapshot, as the contract says.
@Suite(.serialized) struct RoomSnapshotPauseTests {
    static let room = "pause-room"
    static let epoch = "e1"

    static func sticker(_ x: Double) -> Sticker {
        Sticker(id: "s1", image: "star", frame: Frame(x: x, y: 0, width: 10, height: 10), owner: nil,
                createdBy: "alice", updatedBy: "alice", updatedAt: 10)
    }

    /// One batch of the coordinator's: the room moved to `version`, its change, then its snapshot.
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
    static func reach(_ version: Int64, _ replicas: AsyncStream<RoomReplica>, _ bob: TandemClient) async throws -> RoomReplica {
        do {
            return try await first(replicas, timeout: .seconds(10)) { $0.version == version }
        } catch {
            let held = await bob.replica(of: room)?.version
            let read = await bob.roomSnapshotsRead
            Issue.record("waited for version \(version): the replica is at \(held.map(String.init) ?? "nothing"), \(read) snapshots read")
            throw error
        }
    }

    @Test func aRoomInStepReadsNoSnapshotsAndAGapBringsOne() async throws {
        try await withBroker(.open) { broker in
            let coordinator = try await TestPeer.connect(broker: broker, user: "coordinator")
            let transport = try MosquittoTransport(host: broker.host, port: broker.port, user: "bob", clientId: "bob-phone")
            let bob = TandemClient(transport: transport, user: "bob", clientId: "bob-phone")
            try await bob.connect()

            try await Self.batch(coordinator, to: 1, changes: false)
            let replicas = try await bob.room(Self.room)
            _ = try await Self.reach(1, replicas, bob)
            #expect(await bob.roomSnapshotsRead == 1)
            try await Self.settle(transport)

            // In step: twenty batches, each change applied; their snapshots are not sent.
            for version in Int64(2)...21 { try await Self.batch(coordinator, to: version) }
            let inStep = try await Self.reach(21, replicas, bob)
            #expect(inStep.visibleSticker("s1")?.frame.x == 21)
            let afterSteps = await bob.roomSnapshotsRead
            #expect(afterSteps == 1, "snapshots read in step: \(afterSteps)")

            // A gap: versions 22-30 were never heard (the room's snapshot at 30 is
            // retained, unseen); the change to 31 does not follow on, so bob asks for
            // the snapshot topic again, and keeps it until a snapshot reaches 31 (the
            // retained one it gets at once may still be 30).
            try await Self.batch(coordinator, to: 30, changes: false)
            try await Self.batch(coordinator, to: 31)
            let caughtUp = try await Self.reach(31, replicas, bob)
            #expect(caughtUp.visibleSticker("s1")?.frame.x == 31)
            let afterGap = await bob.roomSnapshotsRead
            #expect(afterGap > afterSteps)
            try await Self.settle(transport)

            // And in step again: the snapshots pause once more.
            for version in Int64(32)...51 { try await Self.batch(coordinator, to: version) }
            _ = try await Self.reach(51, replicas, bob)
            let atEnd = await bob.roomSnapshotsRead
            #expect(atEnd == afterGap, "snapshots read in step after the gap: \(atEnd - afterGap)")

            await bob.close()
            await coordinator.close()
        }
    }

    /// A reconnect subscribes the paused topic again: what changed while the client was
    /// away comes with the snapshot, and the topic pauses again after it.
    @Test func aReconnectBringsTheSnapshotAndPausesAgain() async throws {
        try await withBroker(.open) { broker in
            let coordinator = try await TestPeer.connect(broker: broker, user: "coordinator")
            let transport = try MosquittoTransport(host: broker.host, port: broker.port, user: "bob", clientId: "bob-phone")
            let bob = TandemClient(transport: transport, user: "bob", clientId: "bob-phone")
            try await bob.connect()
            try await Self.batch(coordinator, to: 1, changes: false)
            let replicas = try await bob.room(Self.room)
            for version in Int64(2)...11 { try await Self.batch(coordinator, to: version) }
            _ = try await Self.reach(11, replicas, bob)

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
            let back = try await Self.reach(40, replicas, bob)
            #expect(back.visibleSticker("s1")?.frame.x == 40)
            let afterReconnect = await bob.roomSnapshotsRead
            try await Self.settle(transport)
            for version in Int64(41)...60 { try await Self.batch(coordinator, to: version) }
            _ = try await Self.reach(60, replicas, bob)
            let atEnd = await bob.roomSnapshotsRead
            #expect(atEnd == afterReconnect, "snapshots read in step after the reconnect: \(atEnd - afterReconnect)")

            await bob.close()
            await coordinator.close()
        }
    }
}
