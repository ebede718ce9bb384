import Testing
@testable import TandemCore

@Suite struct RoomExpiryTests {
    @Test func aLockExpiresWhenItsLeaseRunsOut() throws {
        var room = RoomState(roomId: "r1")
        room.must(.create, "s", by: "alice", now: 1_000)
        #expect(room.nextLeaseDeadline == 31_000)
        #expect(room.expireLeases(now: 30_999).isEmpty)
        let changes = room.expireLeases(now: 31_000)
        let expected = RoomChange(version: 2, eventId: nil, userId: nil, type: .expire, stickerId: "s", sticker: room.sticker("s"))
        #expect(changes == [expected])
        let sticker = try #require(room.sticker("s"))
        #expect(sticker.owner == nil && sticker.updatedAt == 31_000 && sticker.updatedBy == "alice")
        #expect(room.version == 2 && room.updatedAt == 31_000)
        #expect(room.nextLeaseDeadline == nil && room.leaseDeadlines.isEmpty)
        #expect(room.must(.acquire, "s", by: "bob", now: 31_001)?.sticker?.owner == "bob")
    }

    @Test func everyAcceptedEventOfTheOwnerRenewsTheLease() {
        var room = RoomState(roomId: "r1")
        room.must(.create, "s", by: "alice", now: 1_000)
        room.must(.update, "s", by: "alice", now: 20_000)
        #expect(room.nextLeaseDeadline == 50_000)
        #expect(room.expireLeases(now: 31_000).isEmpty)
        room.must(.acquire, "s", by: "alice", now: 40_000)
        #expect(room.expireLeases(now: 50_000).isEmpty)
        #expect(room.expireLeases(now: 70_000).map(\.stickerId) == ["s"])
    }

    @Test func releaseAndDeleteClearTheLease() {
        var room = RoomState(roomId: "r1")
        room.must(.create, "a", by: "alice", now: 1_000)
        room.must(.create, "b", by: "alice", now: 2_000)
        room.must(.release, "a", by: "alice", now: 3_000)
        #expect(room.nextLeaseDeadline == 32_000)
        room.must(.delete, "b", by: "alice", now: 4_000)
        #expect(room.nextLeaseDeadline == nil)
        #expect(room.expireLeases(now: .max).isEmpty)
        #expect(room.version == 4)
    }

    @Test func expiriesComeEarliestFirstEachWithItsOwnVersion() {
        var room = RoomState(roomId: "r1")
        room.must(.create, "c", by: "carol", now: 3_000)
        room.must(.create, "a", by: "alice", now: 1_000)
        room.must(.create, "b", by: "bob", now: 2_000)
        let changes = room.expireLeases(now: 40_000)
        #expect(changes.map(\.stickerId) == ["a", "b", "c"])
        #expect(changes.map(\.version) == [4, 5, 6])
        #expect(changes.allSatisfy { $0.type == .expire && $0.sticker?.owner == nil && $0.sticker?.updatedAt == 40_000 })
    }

    @Test func presenceExpiryReleasesOnlyThatUsersLocksInCreationOrder() {
        var room = RoomState(roomId: "r1")
        room.must(.create, "a2", by: "alice", now: 1_000)
        room.must(.create, "b", by: "bob", now: 1_000)
        room.must(.create, "a1", by: "alice", now: 2_000)
        room.must(.create, "a3", by: "alice", now: 3_000)
        room.must(.release, "a3", by: "alice", now: 3_000)
        let changes = room.expireLocks(ownedBy: "alice", now: 9_000)
        #expect(changes.map(\.stickerId) == ["a2", "a1"])
        #expect(changes.map(\.version) == [6, 7])
        #expect(room.sticker("b")?.owner == "bob")
        #expect(room.nextLeaseDeadline == 31_000)
        #expect(room.leaseDeadlines.keys.sorted() == ["b"])
        #expect(room.expireLocks(ownedBy: "alice", now: 9_001).isEmpty)
    }

    @Test func manyRenewalsDoNotLeakLeaseEntries() {
        var room = RoomState(roomId: "r1")
        room.must(.create, "s", by: "alice", now: 0)
        for now in 1...10_000 { room.must(.update, "s", by: "alice", now: Millis(now)) }
        #expect(room.nextLeaseDeadline == 40_000)
        #expect(room.expireLeases(now: 39_999).isEmpty)
        #expect(room.expireLeases(now: 40_000).count == 1)
    }
}
