import Synchronization
import Testing
@testable import TandemClient
import TandemCore

/// A watched room's or conversation's replica is changed in place: the latest value that
/// its broadcast keeps for later listeners shares the replica's storage, and a change
/// made to shared storage would copy it whole (every sticker of the room, every message
/// of the conversation) for each change. The broadcast still gives a later listener the
/// latest replica, changed or not.
@Suite struct ReplicaInPlaceTests {
    static func sticker(_ id: String, x: Double) -> Sticker {
        Sticker(id: id, image: "star", frame: Frame(x: x, y: 2, width: 3, height: 4), owner: nil,
                createdBy: "alice", updatedBy: "alice", updatedAt: 10)
    }

    static func roomWatch(stickers: Int) -> TandemClient.RoomWatch {
        var replica = RoomReplica(roomId: "r")
        let all = (0..<stickers).map { sticker("s\($0)", x: Double($0)) }
        replica.snapshot(RoomSnapshot(roomId: "r", epoch: "e", version: 1, updatedAt: 10, stickers: all))
        let watch = TandemClient.RoomWatch(replica: replica)
        // As TandemClient.changed(room:) does after every change: the broadcast keeps it.
        watch.replicas.send(watch.replica)
        return watch
    }

    static func update(_ id: String, from version: Int64, x: Double) -> RoomChanges {
        let change = RoomChange(version: version + 1, eventId: "e\(version)", userId: "bob", type: .update, stickerId: id, sticker: sticker(id, x: x))
        return RoomChanges(roomId: "r", epoch: "e", fromVersion: version, toVersion: version + 1, changes: [change])
    }

    static func storage(_ stickers: [Sticker]) -> UnsafeRawPointer? {
        stickers.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func aRoomChangeIsMadeInPlaceAndTheLatestReplicaStaysKept() {
        let watch = Self.roomWatch(stickers: 100)
        let before = Self.storage(watch.replica.confirmedStickers)
        let applied = watch.change { $0.changes(Self.update("s7", from: 1, x: 70)) }
        #expect(applied)
        // The same storage: changed where it was, not copied with its hundred stickers.
        #expect(Self.storage(watch.replica.confirmedStickers) == before)
        #expect(watch.replica.visibleSticker("s7")?.frame.x == 70)
        // Kept for a listener that comes later: the replica as changed.
        #expect(Self.same(watch.replicas.current, watch.replica))
    }

    @Test func changesThatDoNotFollowOnKeepTheLatestReplica() {
        let watch = Self.roomWatch(stickers: 3)
        let held = watch.replica
        // A gap (from version 5, the replica is at 1): nothing applied.
        let applied = watch.change { $0.changes(Self.update("s1", from: 5, x: 9)) }
        #expect(!applied)
        #expect(Self.same(watch.replica, held))
        #expect(Self.same(watch.replicas.current, held))
    }

    @Test func nothingKeptBeforeStaysNotKept() {
        // A room whose replica was never sent: nothing for a later listener to start from.
        let watch = TandemClient.RoomWatch(replica: RoomReplica(roomId: "r"))
        _ = watch.change { $0.changes(Self.update("s1", from: 0, x: 1)) }
        #expect(watch.replicas.current == nil)
    }

    /// The same room as far as a listener sees it.
    static func same(_ a: RoomReplica?, _ b: RoomReplica) -> Bool {
        guard let a else { return false }
        return a.epoch == b.epoch && a.version == b.version && a.visibleStickers == b.visibleStickers && a.pendingEventIds == b.pendingEventIds
    }

    @Test func aBroadcastThatKeepsNothingKeepsNothing() {
        var updates = Broadcast<[Int]>(buffering: .unbounded, keepsLatest: false)
        var sent = [1]
        updates.send(sent)
        updates.change(&sent) { $0.append(2) }
        #expect(updates.current == nil)
        var replicas = Broadcast<[Int]>()
        var held = [1, 2, 3]
        replicas.send(held)
        let before = held.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
        replicas.change(&held) { $0[0] = 3 }
        // Changed where it was, and kept for the next listener as changed.
        #expect(held.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) } == before)
        #expect(replicas.current == [3, 2, 3])
        let seen = Mutex<[[Int]]>([])
        _ = replicas.listen { value in seen.withLock { $0.append(value) } }
        #expect(seen.withLock { $0 } == [[3, 2, 3]])
        // Nothing kept before: nothing kept after.
        var fresh = Broadcast<[Int]>()
        var value = [1]
        fresh.change(&value) { $0[0] = 2 }
        #expect(fresh.current == nil)
    }
}
