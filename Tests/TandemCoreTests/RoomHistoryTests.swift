import Testing
@testable import TandemCore

/// Restore and history in the pure core: the wire, `RoomState.applyRestore`, and the
/// replay that rebuilds a room at a version from a checkpoint and the rows after it.
@Suite struct RoomHistoryTests {
    let rules = MembershipRules.Context(maxMembers: 8, knownUsers: nil)

    func sticker(_ id: String, x: Double = 1, by user: String = "alice") -> Sticker {
        Sticker(id: id, image: "\(id).png", frame: Frame(x: x, y: 2, width: 3, height: 4), owner: nil, createdBy: user, updatedBy: user, updatedAt: 0)
    }

    func create(_ id: String, at t: Millis) -> EditEvent {
        EditEvent(eventId: "c-\(id)-\(t)", type: .create, stickerId: id, timestamp: t, image: "\(id).png", frame: Frame(x: 1, y: 2, width: 3, height: 4))
    }

    @Test func aRestoreReadsItsVersionAndNothingElse() throws {
        let event = try EditEvent.decode(#"{"eventId":"r1","type":"restore","timestamp":5,"version":3,"stickerId":"ignored"}"#.utf8)
        #expect(event.type == .restore)
        #expect(event.restoreVersion == 3)
        #expect(event.stickerId == "")
        #expect(event.json().serialized() == Array(#"{"eventId":"r1","type":"restore","timestamp":5,"version":3}"#.utf8))
        for bad in [#"{"eventId":"r1","type":"restore","timestamp":5}"#, #"{"eventId":"r1","type":"restore","timestamp":5,"version":0}"#,
                    #"{"eventId":"r1","type":"restore","timestamp":5,"version":"3"}"#] {
            guard let failure = DecodeFailure.of({ try EditEvent.decode(bad.utf8) }) else { Issue.record("accepted \(bad)"); continue }
            #expect(failure.rejection.code == .invalidPayload)
            #expect(failure.id == "r1")
        }
    }

    @Test func aRestoreChangeRoundTrips() throws {
        let change = RoomChange(version: 7, eventId: "r1", userId: "alice", restoredFrom: 3, stickers: [sticker("s1")])
        let json = change.json()
        #expect(json["stickerId"] == .null)
        #expect(json["sticker"] == .null)
        #expect(json["restoredFrom"] == .int(3))
        #expect(try RoomChange(json: json) == change)
    }

    @Test func aRestoreChangesMessageIsWrittenStraightAndReadsTheSame() throws {
        let restore = RoomChange(version: 7, eventId: "r1", userId: "alice", restoredFrom: 3, stickers: [sticker("s1"), sticker("s\"2", x: 0.5)])
        let update = RoomChange(version: 8, eventId: "u1", userId: "bob", type: .update, stickerId: "s1", sticker: sticker("s1", x: 9))
        for list in [[restore], [restore, update], [update, restore], [update]] {
            let message = RoomChanges(roomId: "r", epoch: "e", fromVersion: 6, toVersion: 8, changes: list)
            #expect(message.serialized() == message.json().serialized())
            #expect(try RoomChanges.decode(message.serialized()) == message)
        }
    }

    @Test func applyRestoreBringsBackDeletedStickersAndTombstonesLaterOnes() throws {
        var room = RoomState(roomId: "r")
        for (i, id) in ["s1", "s2", "s3"].enumerated() {
            #expect(room.apply(create(id, at: Millis(i)), from: "alice", now: 0, lease: 1_000, rules: rules).outcome.isAccepted)
        }
        #expect(room.apply(EditEvent(eventId: "d", type: .delete, stickerId: "s1", timestamp: 5), from: "alice", now: 0, lease: 1_000, rules: rules).outcome.isAccepted)
        let event = EditEvent(eventId: "r1", restoringTo: 2, timestamp: 9)
        #expect(room.checkRestore(event, from: "alice", rules: rules) == nil)
        #expect(room.checkRestore(EditEvent(eventId: "r2", restoringTo: 4, timestamp: 9), from: "alice", rules: rules)?.code == .invalidPayload)
        #expect(room.checkRestore(event, from: "bob", rules: rules)?.code == .notMember)
        let outcome = room.applyRestore(event, stickers: [sticker("s1"), sticker("s2")], from: "bob")
        #expect(outcome.isAccepted)
        #expect(room.version == 5)
        #expect(room.stickers.map(\.id) == ["s1", "s2"])
        #expect(room.stickers.allSatisfy { $0.owner == nil && $0.updatedBy == "bob" && $0.updatedAt == 9 })
        #expect(room.nextLeaseDeadline == nil)
        #expect(room.isDeleted("s3"))
        #expect(!room.isDeleted("s1"))
        // What it became survives the body's round trip.
        #expect(try RoomState(persistedBytes: room.persistedBytes()).stickers == room.stickers)
    }

    @Test func replayFromACheckpointGivesTheRoomAtEachVersion() throws {
        // Apply random edits with the real rules; at each version remember the stickers,
        // and check that the checkpoint at version 0 plus the rows gives them back.
        var generator = SplitMix64(seed: 42)
        var room = RoomState(roomId: "r")
        var rows: [RoomHistoryRow] = []
        var expected: [Int64: [Sticker]] = [0: []]
        for step in 0..<400 {
            let id = "s\(Int.random(in: 0..<12, using: &generator))"
            let t = Millis(step)
            let event: EditEvent
            switch Int.random(in: 0..<5, using: &generator) {
            case 0: event = create(id, at: t)
            case 1: event = EditEvent(eventId: "u\(step)", type: .update, stickerId: id, timestamp: t,
                                      image: Bool.random(using: &generator) ? "new.png" : nil,
                                      frame: Frame(x: Double(step), y: 1, width: 2, height: 3))
            case 2: event = EditEvent(eventId: "d\(step)", type: .delete, stickerId: id, timestamp: t)
            case 3: event = EditEvent(eventId: "a\(step)", type: .acquire, stickerId: id, timestamp: t)
            default: event = EditEvent(eventId: "l\(step)", type: .release, stickerId: id, timestamp: t)
            }
            let user = Bool.random(using: &generator) ? "alice" : "bob"
            if room.exists, room.members.role(of: user) == nil {
                _ = room.apply(EditEvent(eventId: "i\(step)", type: .invite, member: user, timestamp: t), from: "alice", now: t, lease: 10, rules: rules)
                rows.append(RoomHistoryRow(roomId: "r", change: RoomChange(version: room.version, eventId: "i\(step)", userId: "alice", type: .invite, member: user, role: .editor), timestamp: t, loggedAt: t))
                expected[room.version] = room.stickers
            }
            let applied = room.apply(event, from: room.exists ? user : "alice", now: t, lease: 10, rules: rules)
            for change in applied.changes {
                rows.append(RoomHistoryRow(roomId: "r", change: change, timestamp: t, loggedAt: t))
            }
            if applied.outcome.isAccepted { expected[room.version] = room.stickers }
            for change in room.expireLeases(now: t) {
                rows.append(RoomHistoryRow(roomId: "r", change: change, timestamp: t, loggedAt: t))
                expected[room.version] = room.stickers
            }
        }
        #expect(rows.map(\.version) == Array(1...room.version))
        let empty = try RoomHistory.stickers(inCheckpoint: RoomHistory.checkpointBody(of: RoomState(roomId: "r")))
        for version in stride(from: Int64(0), through: room.version, by: 7) {
            let replayed = RoomHistory.replay(empty, rows: Array(rows.prefix(Int(version))))
            let want = try #require(expected[version] ?? expected.filter { $0.key < version }.max { $0.key < $1.key }?.value)
            #expect(replayed.map(\.id) == want.map(\.id), "version \(version)")
            #expect(replayed.map(\.frame) == want.map(\.frame), "version \(version)")
            #expect(replayed.map(\.image) == want.map(\.image), "version \(version)")
            #expect(replayed.map(\.createdBy) == want.map(\.createdBy), "version \(version)")
        }
        // A checkpoint in the middle gives the same as the whole replay.
        let middle = room.version / 2
        let atMiddle = RoomHistory.replay(empty, rows: Array(rows.prefix(Int(middle))))
        let checkpoint = try RoomHistory.stickers(inCheckpoint: RoomHistory.checkpointBody(roomId: "r", version: middle, updatedAt: 0, stickers: atMiddle))
        #expect(RoomHistory.replay(checkpoint, rows: Array(rows[Int(middle)...])).map(\.id) == RoomHistory.replay(empty, rows: rows).map(\.id))
    }
}
