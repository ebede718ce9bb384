import Testing
import TandemClient
import TandemCore
import TandemMQTT
import TestSupport

/// Issue 35, items 3 and 4, through `TandemClient` against the real broker and
/// coordinator: a room's history, a restore, undo and redo of a person's own changes,
/// and cursors.
@Suite(.serialized) struct RoomHistoryClientTests {
    static let a = Frame(x: 10, y: 10, width: 50, height: 50)
    static let b = Frame(x: 100, y: 20, width: 50, height: 50)
    static let c = Frame(x: 200, y: 30, width: 50, height: 50)

    func client(_ broker: MosquittoBroker, _ user: String, device: String = "phone") throws -> TandemClient {
        let clientId = "\(user)-\(device)"
        let authenticates = broker.configuration.authenticates
        let transport = try MosquittoTransport(
            host: broker.host, port: broker.port, username: authenticates ? user : nil, password: authenticates ? "\(user)-demo" : nil,
            user: user, clientId: clientId)
        return TandemClient(transport: transport, user: user, clientId: clientId)
    }

    /// Every receipt a call returned, to check at the end that none was `history_gone`.
    final class Receipts: Sendable {
        let all = LockedBox<[Receipt]>([])

        @discardableResult
        func note(_ receipt: Receipt) -> Receipt {
            all.update { $0.append(receipt) }
            return receipt
        }
    }

    static func expect(_ receipt: Receipt?, _ status: Receipt.Status, _ code: ReceiptCode? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(receipt?.status == status && receipt?.code == code, "\(String(describing: receipt))", sourceLocation: sourceLocation)
    }

    @Test(.timeLimit(.minutes(3)))
    func historyRestoreUndoAndRedo() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try client(broker, "alice")
            let bob = try client(broker, "bob")
            let carol = try client(broker, "carol")
            for peer in [alice, bob, carol] { try await peer.connect() }
            let room = "history-room"
            let seen = try await alice.room(room)
            let noted = Receipts()

            // v1-v7: stickers made, two members, a move, a delete, a later sticker.
            Self.expect(noted.note(try await alice.edit(.create, sticker: "s1", in: room, image: "one.png", frame: Self.a)), .accepted)
            Self.expect(noted.note(try await alice.invite("bob", to: room)), .accepted)
            Self.expect(noted.note(try await alice.invite("carol", to: room, as: .viewer)), .accepted)
            Self.expect(noted.note(try await alice.edit(.create, sticker: "s2", in: room, image: "two.png", frame: Self.a)), .accepted)
            Self.expect(noted.note(try await alice.edit(.update, sticker: "s1", in: room, frame: Self.b)), .accepted)
            let atFive = try await first(seen) { $0.version == 5 && $0.pendingEventIds.isEmpty }
            Self.expect(noted.note(try await alice.edit(.delete, sticker: "s2", in: room)), .accepted)
            Self.expect(noted.note(try await alice.edit(.create, sticker: "s3", in: room, image: "three.png", frame: Self.c)), .accepted)
            let atSeven = try await first(seen) { $0.version == 7 && $0.pendingEventIds.isEmpty }

            // The history, newest first, and a page of it.
            let page = try await alice.history(room: room)
            #expect(page.roomId == room && page.version == 7 && page.epoch == atSeven.epoch)
            #expect(page.oldest <= 1, "every version of a young room is restorable: \(page.oldest)")
            #expect(page.entries.map(\.version) == [7, 6, 5, 4, 3, 2, 1])
            #expect(page.entries.map(\.type) == [.create, .delete, .update, .create, .invite, .invite, .create])
            #expect(page.entries.map(\.stickerId) == ["s3", "s2", "s1", "s2", nil, nil, "s1"])
            #expect(page.entries.allSatisfy { $0.userId == "alice" && $0.eventId != nil })
            #expect(page.entries.map(\.timestamp) == page.entries.map(\.timestamp).sorted(by: >))
            let older = try await alice.history(room: room, before: 5, limit: 2)
            #expect(older.entries.map(\.version) == [4, 3] && older.version == 7)
            // A viewer reads it too; someone who is not a member reads nothing of it.
            #expect(try await carol.history(room: room, limit: 1).entries.map(\.version) == [7])
            do {
                _ = try await alice.history(room: "no-such-room")
                Issue.record("a room that does not exist answered")
            } catch TandemClientError.queryRejected(let code, let message) {
                #expect(code == "not_member", "\(message)")
            }
            do {
                _ = try await bob.history(room: "bobs-not-in-it-\(IdentifierGenerator.randomHex(4))")
                Issue.record("answered")
            } catch let error as TandemClientError {
                #expect(error.description.hasPrefix("not_member: "), "\(error)")
            }

            // Restore: a viewer may not; a version not below the current one is invalid.
            Self.expect(noted.note(try await carol.restore(room: room, to: 5)), .rejected, .forbidden)
            Self.expect(noted.note(try await alice.restore(room: room, to: 7)), .rejected, .invalidPayload)
            Self.expect(noted.note(try await alice.restore(room: room, to: 99)), .rejected, .invalidPayload)
            let restored = noted.note(try await alice.restore(room: room, to: 5))
            Self.expect(restored, .accepted)
            #expect(restored.version == 8)
            let back = try await first(seen) { $0.version == 8 }
            // The stickers as they were right after version 5: s2 (deleted at 6) is back
            // under its id, s3 (created at 7) is gone; every lock released.
            let fields = { (s: Sticker) in "\(s.id) \(s.image) \(s.frame) \(s.createdBy)" }
            #expect(back.confirmedStickers.map(fields) == atFive.confirmedStickers.map(fields))
            #expect(back.confirmedStickers.allSatisfy { $0.owner == nil && $0.updatedBy == "alice" })
            #expect(back.members.map(\.userId) == ["alice", "bob", "carol"], "membership does not change")
            let afterRestore = try await alice.history(room: room, limit: 1)
            #expect(afterRestore.entries.first.map { "\($0.version) \($0.type) \($0.userId ?? "-") \($0.stickerId ?? "-")" } == "8 restore alice -")

            // Undo and redo of alice's own changes (the restore cleared what came before).
            #expect(await alice.undoHistory(of: room)?.canUndo != true)
            Self.expect(noted.note(try await alice.edit(.update, sticker: "s1", in: room, frame: Self.c)), .accepted)  // takes s1's lock
            Self.expect(noted.note(try await alice.edit(.delete, sticker: "s2", in: room)), .accepted)
            #expect(await alice.undoHistory(of: room)?.undoStack.map(\.kind) == [.update, .delete])

            // Waits for alice's replica to settle at the version `receipt` names, plus the
            // release an undo or redo sends after its event when it took a lock.
            func settled(_ receipt: Receipt, released: Bool = false) async throws -> RoomReplica {
                let version = (receipt.version ?? 0) + (released ? 1 : 0)
                return try await first(seen) { $0.version >= version && $0.pendingEventIds.isEmpty }
            }
            func s1(_ replica: RoomReplica) -> String {
                replica.confirmedStickers.first { $0.id == "s1" }.map { "\($0.frame) \($0.owner ?? "-")" } ?? "none"
            }

            // The delete undone: s2 comes back under a new id (s2 itself is tombstoned), unlocked.
            let undoDelete = noted.note(try #require(try await alice.undo(room: room)))
            Self.expect(undoDelete, .accepted)
            let recreated = try await settled(undoDelete, released: true)
            let s2again = try #require(recreated.confirmedStickers.last)
            #expect(s2again.id != "s2" && s2again.id.hasPrefix("s2-"), "\(s2again)")
            #expect(s2again.image == "two.png" && s2again.frame == Self.a && s2again.owner == nil, "\(s2again)")
            #expect(recreated.confirmedStickers.map(\.id) == ["s1", s2again.id])
            // The move undone: s1 back where the restore put it, still held by alice (she held it).
            let undoMove = noted.note(try #require(try await alice.undo(room: room)))
            Self.expect(undoMove, .accepted)
            #expect(s1(try await settled(undoMove)) == "\(Self.b) alice")
            // Redo, twice: the move, then the delete of the sticker under its new id.
            let redoMove = noted.note(try #require(try await alice.redo(room: room)))
            Self.expect(redoMove, .accepted)
            #expect(s1(try await settled(redoMove)) == "\(Self.c) alice")
            let redoDelete = noted.note(try #require(try await alice.redo(room: room)))
            Self.expect(redoDelete, .accepted)
            #expect(try await settled(redoDelete).confirmedStickers.map(\.id) == ["s1"])
            #expect(try await alice.redo(room: room) == nil, "nothing left to redo")

            // Undo once more; lock handling keeps the redo, a new change clears it.
            Self.expect(noted.note(try #require(try await alice.undo(room: room))), .accepted)
            #expect(await alice.undoHistory(of: room)?.canRedo == true)
            Self.expect(noted.note(try await alice.edit(.release, sticker: "s1", in: room)), .accepted)
            #expect(await alice.undoHistory(of: room)?.canRedo == true)
            Self.expect(noted.note(try await alice.edit(.update, sticker: "s1", in: room, frame: Self.a)), .accepted)
            #expect(await alice.undoHistory(of: room)?.canRedo == false)

            // bob holds s1: alice's undo of her move is refused, changes nothing, and stays
            // on her stack; once bob lets go, it goes through.
            Self.expect(noted.note(try await alice.edit(.release, sticker: "s1", in: room)), .accepted)
            let bobsView = try await bob.room(room)
            let taken = noted.note(try await bob.edit(.acquire, sticker: "s1", in: room))
            Self.expect(taken, .accepted)
            #expect(s1(try await settled(taken)) == "\(Self.a) bob")
            let refused = noted.note(try #require(try await alice.undo(room: room)))
            Self.expect(refused, .rejected, .ownedByOther)
            #expect(refused.version == taken.version, "nothing changed")
            let unchanged = try #require(await alice.replica(of: room))
            #expect(unchanged.pendingEventIds.isEmpty)
            #expect(unchanged.visibleSticker("s1").map { "\($0.frame) \($0.owner ?? "-")" } == "\(Self.a) bob")
            #expect(await alice.undoHistory(of: room)?.undoStack.last?.kind == .update, "kept for another try")
            let letGo = noted.note(try await bob.edit(.release, sticker: "s1", in: room))
            Self.expect(letGo, .accepted)
            _ = try await settled(letGo)
            let retried = noted.note(try #require(try await alice.undo(room: room)))
            Self.expect(retried, .accepted)
            let version = (retried.version ?? 0) + 1
            let undone = try await first(bobsView) { $0.version >= version }
            #expect(s1(undone) == "\(Self.c) -", "back where alice's move found it, the lock the undo took released")
            #expect(undone.confirmedStickers.first?.updatedBy == "alice")

            // Nothing on this path was history_gone.
            #expect(noted.all.get().allSatisfy { $0.code != .historyGone })
            for peer in [alice, bob, carol] { await peer.close() }
            #expect(await coordinator.stop() == 0)
        }
    }

    /// Cursors on a broker that lets anyone publish them (the shipped ACL's cursor grants
    /// are the broker's side of the contract): at most 20 a second, the last position of a
    /// burst always arrives, `{}` when the pointer leaves and when the client closes,
    /// QoS 0 and not retained, malformed ones and one's own left out.
    @Test(.timeLimit(.minutes(1)))
    func cursorsArePacedAndTheLastPositionWins() async throws {
        try await withBroker(.open) { broker in
            let room = "cursor-room"
            let alice = try client(broker, "alice")
            let bob = try client(broker, "bob")
            let raw = try await TestPeer.connect(broker: broker, user: "carol", extraFilters: [Topics().roomCursors(room: room)])
            let bobs = try await bob.cursors(room: room)
            let alices = try await alice.cursors(room: room)
            try await alice.connect()
            try await bob.connect()
            let heard = LockedBox<[RoomCursor]>([])
            let collector = Task {
                for await cursor in bobs { heard.update { $0.append(cursor) } }
            }
            let alicesOwn = LockedBox<[RoomCursor]>([])
            let ownCollector = Task {
                for await cursor in alices { alicesOwn.update { $0.append(cursor) } }
            }
            func fromAlice() -> [RoomCursor] { heard.get().filter { $0.userId == "alice" } }
            func waitFor(_ condition: @escaping () -> Bool) async throws {
                let deadline = ContinuousClock.now + .seconds(10)
                while !condition() {
                    guard ContinuousClock.now < deadline else { throw WaitError() }
                    try await Task.sleep(for: .milliseconds(10))
                }
            }

            // A burst: the first at once, the last after the interval, at most one per
            // 50 ms between (a busy machine may spread the burst over more than 50 ms).
            let burst = ContinuousClock.now
            for n in 0..<100 { await alice.publishCursor(room: room, x: Double(n), y: Double(n) / 2) }
            let burstTook = ContinuousClock.now - burst
            try await waitFor { fromAlice().last?.position == CursorPosition(x: 99, y: 49.5) }
            try await Task.sleep(for: .milliseconds(200))
            #expect(fromAlice().count <= 2 + Int(burstTook / .milliseconds(50)), "\(fromAlice().count) messages for a burst of \(burstTook)")

            // A second of steady movement every 5 ms: about 20, never much more.
            let before = fromAlice().count
            let start = ContinuousClock.now
            var n = 0
            while ContinuousClock.now - start < .seconds(1) {
                n += 1
                await alice.publishCursor(room: room, x: 1_000 + Double(n), y: 0)
                try await Task.sleep(for: .milliseconds(5))
            }
            let final = CursorPosition(x: 1_000 + Double(n), y: 0)
            try await waitFor { fromAlice().last?.position == final }
            let took = ContinuousClock.now - start
            let steady = fromAlice().count - before
            // Never two closer than 50 ms: at most one per 50 ms of the time it took, plus the first.
            #expect(steady <= 1 + Int(took / .milliseconds(50)), "\(steady) messages in \(took) of \(n) moves")
            #expect(steady >= 5, "\(steady) messages in \(took) of \(n) moves")

            // The pointer leaves: `{}` is position nil, even right after a move.
            await alice.publishCursor(room: room, x: 1, y: 1)
            await alice.clearCursor(room: room)
            try await waitFor { fromAlice().last?.userId == "alice" && fromAlice().last?.position == nil }

            // On the wire: QoS 0, not retained, the contract's payloads.
            let wire = raw.heard(from: 0).filter { $0.topic == Topics().roomCursor(room: room, user: "alice") }
            #expect(!wire.isEmpty && wire.allSatisfy { $0.qos == .atMostOnce && !$0.retain })
            #expect(wire.last.map { String(decoding: $0.payload, as: UTF8.self) } == "{}")
            #expect(wire.dropLast().allSatisfy { (try? JSON.parse($0.payload))?["x"]?.doubleValue != nil })

            // Malformed cursors are left out; a good one from carol comes through.
            let carolsTopic = Topics().roomCursor(room: room, user: "carol")
            for bad in [#"{"x":1}"#, "nonsense", #"{"x":"1","y":2}"#, "[1,2]"] {
                try await raw.publishRaw(carolsTopic, Array(bad.utf8))
            }
            try await raw.publish(carolsTopic, .obj(["x": 5, "y": 6]))
            try await waitFor { heard.get().contains { $0.userId == "carol" } }
            #expect(heard.get().filter { $0.userId == "carol" } == [RoomCursor(userId: "carol", position: CursorPosition(x: 5, y: 6))])
            // alice hears carol, never herself.
            try await waitFor { alicesOwn.get().contains { $0.userId == "carol" } }
            #expect(alicesOwn.get().allSatisfy { $0.userId != "alice" })

            // A late listener starts from the positions held.
            let late = try await bob.cursors(room: room)
            var iterator = late.makeAsyncIterator()
            #expect(await iterator.next() == RoomCursor(userId: "carol", position: CursorPosition(x: 5, y: 6)))

            // Closing with the pointer shown says it left.
            await alice.publishCursor(room: room, x: 7, y: 7)
            try await waitFor { fromAlice().last?.position == CursorPosition(x: 7, y: 7) }
            await alice.close()
            try await waitFor { fromAlice().last?.position == nil }

            collector.cancel()
            ownCollector.cancel()
            await bob.close()
            await raw.close()
        }
    }
}
