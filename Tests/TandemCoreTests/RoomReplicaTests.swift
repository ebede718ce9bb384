import Testing
@testable import TandemCore

@Suite struct RoomReplicaTests {
    static let frameA = Frame(x: 1, y: 1, width: 10, height: 10)
    static let frameB = Frame(x: 2, y: 2, width: 20, height: 20)
    static let frameC = Frame(x: 3, y: 3, width: 30, height: 30)

    static func sticker(_ id: String, frame: Frame = frameA, owner: String? = nil) -> Sticker {
        Sticker(id: id, image: "i", frame: frame, owner: owner, createdBy: "bob", updatedBy: "bob", updatedAt: 1)
    }

    static func snapshot(_ version: Int64, epoch: String = "ep1", _ stickers: [Sticker]) -> RoomSnapshot {
        RoomSnapshot(roomId: "r", epoch: epoch, version: version, updatedAt: 1, stickers: stickers)
    }

    @Test func showsAnOwnCreateAtOnceAndUntilTheConfirmedStateHasIt() throws {
        var replica = RoomReplica(roomId: "r")
        let create = Fixture.event(.create, "s1", id: "e1", at: 10)
        #expect(replica.applyLocal(create, as: "alice") == nil)
        #expect(replica.visibleStickers.map(\.id) == ["s1"])
        #expect(replica.visibleSticker("s1")?.owner == "alice")
        #expect(replica.pendingEventIds == ["e1"])

        replica.receipt(.accepted(id: "e1", kind: .room, version: 1))
        #expect(replica.visibleStickers.map(\.id) == ["s1"], "no flicker before the snapshot arrives")
        #expect(replica.pendingEventIds == ["e1"])

        var room = RoomState(roomId: "r")
        _ = room.apply(create, from: "alice", now: 10, lease: 30_000)
        do {
            let taken = replica.snapshot(room.snapshot(epoch: "ep1"))
            #expect(taken)
        }
        #expect(replica.pendingEventIds.isEmpty)
        #expect(replica.visibleStickers == room.stickers)
    }

    @Test func aRejectedEditRollsBackToTheConfirmedState() {
        var replica = RoomReplica(roomId: "r")
        replica.snapshot(Self.snapshot(3, [Self.sticker("s1")]))
        replica.applyLocal(Fixture.event(.update, "s1", id: "e1", frame: Self.frameB), as: "alice")
        #expect(replica.visibleSticker("s1")?.frame == Self.frameB)
        #expect(replica.visibleSticker("s1")?.owner == "alice")
        replica.receipt(.rejected(id: "e1", kind: .room, Rejection(.ownedByOther, "locked"), version: 3))
        #expect(replica.visibleSticker("s1") == Self.sticker("s1"))
        #expect(replica.pendingEventIds.isEmpty)
    }

    @Test func aRejectedCreateDisappears() {
        var replica = RoomReplica(roomId: "r")
        replica.applyLocal(Fixture.event(.create, "s1", id: "e1"), as: "alice")
        replica.receipt(.rejected(id: "e1", kind: .room, Rejection(.deleted, "gone"), version: 7))
        #expect(replica.visibleStickers.isEmpty)
    }

    @Test func aSnapshotDoesNotOverwriteAStickerWithAPendingEdit() {
        var replica = RoomReplica(roomId: "r")
        replica.snapshot(Self.snapshot(1, [Self.sticker("s1"), Self.sticker("s2")]))
        replica.applyLocal(Fixture.event(.update, "s1", id: "e1", frame: Self.frameB), as: "alice")
        // Someone else's change to s1 and to s2 arrives before alice's receipt.
        replica.snapshot(Self.snapshot(2, [Self.sticker("s1", frame: Self.frameC, owner: "bob"), Self.sticker("s2", frame: Self.frameC)]))
        #expect(replica.visibleSticker("s1")?.frame == Self.frameB)
        #expect(replica.visibleSticker("s2")?.frame == Self.frameC)
        #expect(replica.confirmedStickers.first?.frame == Self.frameC)
        // Rejected after all: the sticker shows the confirmed state.
        replica.receipt(.rejected(id: "e1", kind: .room, Rejection(.ownedByOther, "locked by bob"), version: 2))
        #expect(replica.visibleSticker("s1")?.owner == "bob")
        #expect(replica.visibleSticker("s1")?.frame == Self.frameC)
    }

    @Test func anOlderSnapshotIsIgnoredUnlessItsEpochIsNew() {
        var replica = RoomReplica(roomId: "r")
        do {
            let taken = replica.snapshot(Self.snapshot(5, [Self.sticker("a")]))
            #expect(taken)
        }
        do {
            let taken = replica.snapshot(Self.snapshot(4, []))
            #expect(!taken)
        }
        do {
            let taken = replica.snapshot(Self.snapshot(5, []))
            #expect(!taken)
        }
        #expect(replica.visibleStickers.map(\.id) == ["a"])
        do {
            let taken = replica.snapshot(RoomSnapshot(roomId: "other", epoch: "ep1", version: 9, updatedAt: 1, stickers: []))
            #expect(!taken)
        }

        replica.applyLocal(Fixture.event(.create, "mine", id: "e1"), as: "alice")
        do {
            let taken = replica.snapshot(Self.snapshot(1, epoch: "ep2", [Self.sticker("z")]))
            #expect(taken)
        }
        #expect(replica.epoch == "ep2" && replica.version == 1)
        #expect(replica.visibleStickers.map(\.id) == ["z"], "a new epoch throws everything away, pending edits too")
        #expect(replica.pendingEventIds.isEmpty)
    }

    @Test func appliesChangesOnlyFromItsOwnVersion() throws {
        var room = RoomState(roomId: "r")
        room.must(.create, "a", by: "bob", now: 1)
        var replica = RoomReplica(roomId: "r")
        replica.snapshot(room.snapshot(epoch: "ep1"))

        let batch1 = [room.must(.create, "b", by: "bob", now: 2)!, room.must(.delete, "a", by: "bob", now: 3)!]
        let batch2 = [room.must(.update, "b", by: "bob", now: 4)!]
        let changes1 = try #require(RoomChanges(roomId: "r", epoch: "ep1", changes: batch1))
        let changes2 = try #require(RoomChanges(roomId: "r", epoch: "ep1", changes: batch2))

        do {
            let taken = replica.changes(changes2)
            #expect(!taken, "a gap: wait for the snapshot")
        }
        do {
            let taken = replica.changes(RoomChanges(roomId: "r", epoch: "other", fromVersion: 1, toVersion: 3, changes: batch1))
            #expect(!taken)
        }
        do {
            let taken = replica.changes(changes1)
            #expect(taken)
        }
        #expect(replica.version == 3 && replica.visibleStickers.map(\.id) == ["b"])
        do {
            let taken = replica.changes(changes1)
            #expect(!taken, "already applied")
        }
        do {
            let taken = replica.changes(changes2)
            #expect(taken)
        }
        #expect(replica.visibleStickers == room.stickers)
    }

    @Test func anAcceptedEditIsDroppedOnceTheChangesCatchUp() throws {
        var room = RoomState(roomId: "r")
        room.must(.create, "s", by: "bob", now: 1)
        room.must(.release, "s", by: "bob", now: 2)
        var replica = RoomReplica(roomId: "r")
        replica.snapshot(room.snapshot(epoch: "ep1"))

        let update = Fixture.event(.update, "s", id: "e1", at: 5, frame: Self.frameB)
        replica.applyLocal(update, as: "alice")
        let change = try #require(room.apply(update, from: "alice", now: 5, lease: 30_000).change)
        replica.receipt(.accepted(id: "e1", kind: .room, version: change.version))
        #expect(replica.pendingEventIds == ["e1"])
        replica.changes(try #require(RoomChanges(roomId: "r", epoch: "ep1", changes: [change])))
        #expect(replica.pendingEventIds.isEmpty)
        #expect(replica.visibleStickers == room.stickers)
    }

    @Test func predictsRejectionsButKeepsTheEditPending() {
        var replica = RoomReplica(roomId: "r")
        replica.snapshot(Self.snapshot(1, [Self.sticker("s", owner: "bob")]))
        let predicted = replica.applyLocal(Fixture.event(.acquire, "s", id: "e1"), as: "alice")
        #expect(predicted?.code == .ownedByOther)
        #expect(replica.visibleSticker("s")?.owner == "bob")
        #expect(replica.pendingEventIds == ["e1"])
        // The coordinator may know better (bob's lock expired): an accepted receipt and
        // the changes that follow show alice as owner.
        replica.receipt(.accepted(id: "e1", kind: .room, version: 3))
        replica.snapshot(Self.snapshot(3, [Self.sticker("s", owner: "alice")]))
        #expect(replica.visibleSticker("s")?.owner == "alice")
        #expect(replica.pendingEventIds.isEmpty)
    }

    @Test func laysSeveralPendingEditsOverTheConfirmedStateInOrder() {
        var replica = RoomReplica(roomId: "r")
        replica.snapshot(Self.snapshot(1, [Self.sticker("s")]))
        replica.applyLocal(Fixture.event(.acquire, "s", id: "e1"), as: "alice")
        replica.applyLocal(Fixture.event(.update, "s", id: "e2", frame: Self.frameB), as: "alice")
        replica.applyLocal(Fixture.event(.delete, "s", id: "e3"), as: "alice")
        #expect(replica.visibleStickers.isEmpty)
        // The delete is rejected: acquire and update stay shown.
        replica.receipt(.rejected(id: "e3", kind: .room, Rejection(.ownedByOther, "x"), version: 1))
        #expect(replica.visibleSticker("s")?.frame == Self.frameB)
        #expect(replica.visibleSticker("s")?.owner == "alice")
        // Unknown receipts and other kinds are ignored.
        replica.receipt(.accepted(id: "nope", kind: .room, version: 9))
        replica.receipt(.accepted(id: "e1", kind: .dm, version: 9))
        #expect(replica.pendingEventIds == ["e1", "e2"])
    }

    /// A restore shows nothing ahead of the coordinator (only it holds the room's history)
    /// and predicts no rejection; the RoomChanges that carry it set the stickers whole.
    @Test func anOwnRestoreWaitsForTheCoordinator() {
        var replica = RoomReplica(roomId: "r")
        replica.snapshot(Self.snapshot(3, [Self.sticker("s1"), Self.sticker("s2")]))
        #expect(replica.applyLocal(EditEvent(eventId: "e1", restoringTo: 1, timestamp: 10), as: "alice") == nil)
        #expect(replica.visibleStickers.map(\.id) == ["s1", "s2"])
        #expect(replica.pendingEventIds == ["e1"])
        replica.receipt(.accepted(id: "e1", kind: .room, version: 4))
        #expect(replica.pendingEventIds.isEmpty)
        let restored = Self.sticker("s0", frame: Self.frameC)
        let change = RoomChange(version: 4, eventId: "e1", userId: "alice", restoredFrom: 1, stickers: [restored])
        let applied = replica.changes(RoomChanges(roomId: "r", epoch: "ep1", fromVersion: 3, toVersion: 4, changes: [change]))
        #expect(applied)
        #expect(replica.visibleStickers == [restored])

        // A refused one leaves nothing behind either.
        replica.applyLocal(EditEvent(eventId: "e2", restoringTo: 9, timestamp: 11), as: "alice")
        replica.receipt(.rejected(id: "e2", kind: .room, .invalid("version"), version: 4))
        #expect(replica.pendingEventIds.isEmpty)
        #expect(replica.visibleStickers == [restored])
    }
}
