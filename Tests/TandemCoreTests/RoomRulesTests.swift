import Testing
@testable import TandemCore

/// Every event type against every sticker state (CONTRACT "Rooms", "Rules"). alice sends;
/// bob is the other user. The room already holds bob's sticker "x", so it exists.
@Suite struct RoomRulesTests {
    enum Condition: String, CaseIterable, Sendable {
        case absent, ownedBySender, ownedByOther, unowned, deleted
    }

    enum Expected: Sendable, Equatable {
        /// Accepted; the sticker's owner afterwards (nil: nobody); `removed` after delete.
        case accepted(owner: String?)
        case removed
        case rejected(ReceiptCode)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var type: EditEvent.Kind
        var condition: Condition
        var expected: Expected
        var testDescription: String { "\(type) on \(condition) -> \(expected)" }
    }

    static let table: [Row] = [
        Row(type: .create, condition: .absent, expected: .accepted(owner: "alice")),
        Row(type: .create, condition: .ownedBySender, expected: .rejected(.alreadyExists)),
        Row(type: .create, condition: .ownedByOther, expected: .rejected(.alreadyExists)),
        Row(type: .create, condition: .unowned, expected: .rejected(.alreadyExists)),
        Row(type: .create, condition: .deleted, expected: .rejected(.deleted)),

        Row(type: .acquire, condition: .absent, expected: .rejected(.notFound)),
        Row(type: .acquire, condition: .ownedBySender, expected: .accepted(owner: "alice")),
        Row(type: .acquire, condition: .ownedByOther, expected: .rejected(.ownedByOther)),
        Row(type: .acquire, condition: .unowned, expected: .accepted(owner: "alice")),
        Row(type: .acquire, condition: .deleted, expected: .rejected(.deleted)),

        Row(type: .update, condition: .absent, expected: .rejected(.notFound)),
        Row(type: .update, condition: .ownedBySender, expected: .accepted(owner: "alice")),
        Row(type: .update, condition: .ownedByOther, expected: .rejected(.ownedByOther)),
        Row(type: .update, condition: .unowned, expected: .accepted(owner: "alice")),
        Row(type: .update, condition: .deleted, expected: .rejected(.deleted)),

        Row(type: .release, condition: .absent, expected: .rejected(.notFound)),
        Row(type: .release, condition: .ownedBySender, expected: .accepted(owner: nil)),
        Row(type: .release, condition: .ownedByOther, expected: .rejected(.notOwner)),
        Row(type: .release, condition: .unowned, expected: .rejected(.notOwner)),
        Row(type: .release, condition: .deleted, expected: .rejected(.deleted)),

        Row(type: .delete, condition: .absent, expected: .rejected(.notFound)),
        Row(type: .delete, condition: .ownedBySender, expected: .removed),
        Row(type: .delete, condition: .ownedByOther, expected: .rejected(.ownedByOther)),
        Row(type: .delete, condition: .unowned, expected: .removed),
        Row(type: .delete, condition: .deleted, expected: .rejected(.deleted)),
    ]

    @Test func theTableCoversEveryPair() {
        let pairs = Set(Self.table.map { "\($0.type)/\($0.condition)" })
        #expect(pairs.count == RoomPropertyTests.stickerKinds.count * Condition.allCases.count)
    }

    static func room(_ condition: Condition) -> RoomState {
        var room = RoomState(roomId: "r1")
        room.must(.create, "x", by: "bob", now: 100)
        switch condition {
        case .absent: break
        case .ownedBySender: room.must(.create, "s", by: "alice", now: 200)
        case .ownedByOther: room.must(.create, "s", by: "bob", now: 200)
        case .unowned:
            room.must(.create, "s", by: "bob", now: 200)
            room.must(.release, "s", by: "bob", now: 300)
        case .deleted:
            room.must(.create, "s", by: "bob", now: 200)
            room.must(.delete, "s", by: "bob", now: 300)
        }
        return room
    }

    @Test(arguments: table)
    func appliesTheRule(_ row: Row) throws {
        var room = Self.room(row.condition)
        let before = room
        let event = Fixture.event(row.type, "s", id: "ev", at: 5_000, frame: Frame(x: 7, y: 8, width: 9, height: 10))
        let outcome = room.apply(event, from: "alice", now: 6_000, lease: 30_000)

        switch row.expected {
        case .rejected(let code):
            #expect(outcome.rejection?.code == code)
            #expect(outcome.version == before.version)
            #expect(room == before, "a rejected event changes nothing")
            #expect(outcome.receipt(id: "ev") == Receipt(id: "ev", kind: .room, status: .rejected, code: code, message: outcome.rejection!.message, version: before.version))
        case .accepted(let owner):
            let change = try #require(outcome.change)
            #expect(change.version == before.version + 1 && room.version == change.version)
            #expect(change.eventId == "ev" && change.userId == "alice" && change.stickerId == "s")
            #expect(change.type.rawValue == row.type.rawValue)
            let sticker = try #require(room.sticker("s"))
            #expect(change.sticker == sticker)
            #expect(sticker.owner == owner)
            #expect(sticker.updatedAt == 5_000 && sticker.updatedBy == "alice" && room.updatedAt == 5_000)
            #expect(room.leaseDeadlines["s"] == (owner == nil ? nil : 36_000))
            if row.type == .update || row.type == .create {
                #expect(sticker.frame == Frame(x: 7, y: 8, width: 9, height: 10))
            }
            #expect(outcome.receipt(id: "ev") == .accepted(id: "ev", kind: .room, version: change.version))
        case .removed:
            let change = try #require(outcome.change)
            #expect(change.type == .delete && change.sticker == nil && change.version == before.version + 1)
            #expect(room.sticker("s") == nil && room.isDeleted("s"))
            #expect(room.leaseDeadlines["s"] == nil)
            #expect(room.stickers.map(\.id) == ["x"])
        }
    }

    @Test func aRoomDoesNotExistUntilItsFirstAcceptedEvent() throws {
        var room = RoomState(roomId: "r1")
        let rejected = room.apply(Fixture.event(.acquire, "s", id: "e1"), from: "alice", now: 1, lease: 10)
        #expect(rejected == .rejected(Rejection(.notFound, "no sticker s in this room"), version: nil))
        #expect(rejected.receipt(id: "e1").version == nil)
        #expect(!room.exists && room.version == 0)
        let created = room.apply(Fixture.event(.create, "s", id: "e2"), from: "alice", now: 1, lease: 10)
        #expect(created.version == 1 && room.exists)
    }

    @Test func updateCanReplaceTheImage() throws {
        var room = RoomState(roomId: "r1")
        room.must(.create, "s", by: "alice")
        let outcome = room.apply(Fixture.event(.update, "s", id: "u", image: "dog.png"), from: "alice", now: 2, lease: 10)
        #expect(outcome.change?.sticker?.image == "dog.png")
    }

    @Test func deletionsKeepTheCreationOrderOfTheRest() {
        var room = RoomState(roomId: "r1")
        for i in 0..<200 { room.must(.create, "s\(i)", by: "alice") }
        for i in stride(from: 0, to: 200, by: 3) { room.must(.delete, "s\(i)", by: "alice") }
        let expected = (0..<200).filter { $0 % 3 != 0 }.map { "s\($0)" }
        #expect(room.stickers.map(\.id) == expected)
        #expect(room.stickerCount == expected.count)
        room.must(.create, "late", by: "bob")
        #expect(room.stickers.last?.id == "late")
        #expect(room.must(.update, "s199", by: "alice")?.sticker?.id == "s199")
    }

    @Test func sequentialVersionsAcrossEventsOfSeveralUsers() {
        var room = RoomState(roomId: "r1")
        let versions = [
            room.must(.create, "a", by: "alice")?.version,
            room.must(.create, "b", by: "bob")?.version,
            room.must(.release, "a", by: "alice")?.version,
            room.must(.acquire, "a", by: "bob")?.version,
        ]
        #expect(versions == [1, 2, 3, 4])
    }
}
