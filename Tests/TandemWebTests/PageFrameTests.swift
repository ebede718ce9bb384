import NIOCore
import Testing
import TandemClient
import TandemCore
@testable import TandemWeb

/// The page's frames are read like MQTT payloads: anything malformed is a Problem with a
/// code and a message naming what is wrong, never a crash.
@Suite struct PageFrameTests {
    private func refusal(_ text: String) -> PageFrame.Problem? {
        do throws(PageFrame.Problem) {
            _ = try PageFrame.decode(Array(text.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test func readsEachType() throws {
        #expect(try PageFrame.decode(Array(#"{"type":"ping"}"#.utf8)) == .ping)
        #expect(try PageFrame.decode(Array(#"{"type":"watch","room":"r1"}"#.utf8)) == .watch(room: "r1"))
        let create = #"{"type":"edit","ref":"r7","room":"q","op":"create","sticker":"s1","image":"star","frame":{"x":1,"y":2,"width":3,"height":4}}"#
        #expect(try PageFrame.decode(Array(create.utf8))
            == .edit(ref: "r7", room: "q", type: .create, sticker: "s1", image: "star", frame: Frame(x: 1, y: 2, width: 3, height: 4)))
        let drag = #"{"type":"edit","ref":"r8","room":"q","op":"update","sticker":"s1","frame":{"x":1,"y":2,"width":3,"height":4},"continues":true}"#
        #expect(try PageFrame.decode(Array(drag.utf8))
            == .edit(ref: "r8", room: "q", type: .update, sticker: "s1", image: nil, frame: Frame(x: 1, y: 2, width: 3, height: 4), continues: true))
        #expect(try PageFrame.decode(Array(#"{"type":"dm","ref":"a","op":"message","peer":"bob","text":"hi"}"#.utf8))
            == .dm(ref: "a", type: .message, peer: "bob", text: "hi"))
        #expect(try PageFrame.decode(Array(#"{"type":"history","peer":"bob","before":1700000000000}"#.utf8))
            == .history(peer: "bob", before: 1_700_000_000_000))
        #expect(try PageFrame.decode(Array(#"{"type":"history","peer":"bob"}"#.utf8)) == .history(peer: "bob", before: nil))
        #expect(try PageFrame.decode(Array(#"{"type":"member","ref":"m","room":"q","op":"role","member":"bob","role":"viewer"}"#.utf8))
            == .member(ref: "m", room: "q", type: .role, member: "bob", role: .viewer))
    }

    @Test func readsUndoRedoRestoreHistoryAndCursors() throws {
        func frame(_ text: String) throws -> PageFrame { try PageFrame.decode(Array(text.utf8)) }
        #expect(try frame(#"{"type":"undo","ref":"u1","room":"q"}"#) == .undo(ref: "u1", room: "q", direction: .undo))
        #expect(try frame(#"{"type":"redo","ref":"u2","room":"q"}"#) == .undo(ref: "u2", room: "q", direction: .redo))
        #expect(try frame(#"{"type":"undo","ref":"u1","room":"q"}"#).type == "undo")
        #expect(try frame(#"{"type":"redo","ref":"u1","room":"q"}"#).type == "redo")
        #expect(try frame(#"{"type":"restore","ref":"r1","room":"q","version":12}"#) == .restore(ref: "r1", room: "q", version: 12))
        #expect(try frame(#"{"type":"roomHistory","room":"q"}"#) == .roomHistory(room: "q", before: nil))
        #expect(try frame(#"{"type":"roomHistory","room":"q","before":40}"#) == .roomHistory(room: "q", before: 40))
        #expect(try frame(#"{"type":"cursor","room":"q","x":12.5,"y":600}"#) == .cursor(room: "q", position: CursorPosition(x: 12.5, y: 600)))
        #expect(try frame(#"{"type":"cursor","room":"q","x":0,"y":0}"#) == .cursor(room: "q", position: CursorPosition(x: 0, y: 0)))
        #expect(try frame(#"{"type":"cursor","room":"q","x":1000,"y":625}"#) == .cursor(room: "q", position: CursorPosition(x: 1000, y: 625)))
        // No position: the pointer left the photo (null is no position, as everywhere).
        #expect(try frame(#"{"type":"cursor","room":"q"}"#) == .cursor(room: "q", position: nil))
        #expect(try frame(#"{"type":"cursor","room":"q","x":null,"y":null}"#) == .cursor(room: "q", position: nil))
        for type in ["undo", "redo", "restore", "roomHistory", "cursor"] {
            #expect(PageFrame.types.contains(type))
        }
    }

    @Test(arguments: [
        ("not json", "invalid JSON"),
        ("[1,2]", "must be a JSON object"),
        (#"{"room":"r1"}"#, "type"),
        (#"{"type":"watch","room":"no spaces"}"#, "room"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"create","sticker":"s1","frame":{"x":0,"y":0,"width":1,"height":1}}"#, "image is required"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"update","sticker":"s1"}"#, "frame is required"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"update","sticker":"s1","frame":{"x":0,"y":0,"width":0,"height":1}}"#, "width"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"invite","sticker":"s1"}"#, "op must be"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"explode","sticker":"s1"}"#, "op"),
        (#"{"type":"dm","ref":"r1","op":"message","peer":"bob"}"#, "text is required"),
        (#"{"type":"history","peer":"bob","before":-5}"#, "before must be"),
        (#"{"type":"history","peer":"bob","before":1.5}"#, "before must be an integer"),
        (#"{"type":"history"}"#, "peer"),
        (#"{"type":"member","ref":"m","room":"q","op":"role","member":"bob","role":"owner"}"#, "role must be"),
        // A restore is its own frame, not an edit (it names a version, not a sticker).
        (#"{"type":"edit","ref":"r1","room":"q","op":"restore","sticker":"s1"}"#, "a restore in a restore frame"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"acquire","sticker":"s1","continues":true}"#, "continues is for an update"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"update","sticker":"s1","frame":{"x":0,"y":0,"width":1,"height":1},"continues":"yes"}"#, "continues must be true or false"),
        (#"{"type":"undo","room":"q"}"#, "ref is required"),
        (#"{"type":"redo","ref":"u1"}"#, "room is required"),
        (#"{"type":"undo","ref":"u1","room":"not a room"}"#, "room must be"),
        (#"{"type":"restore","ref":"r1","room":"q"}"#, "version is required"),
        (#"{"type":"restore","ref":"r1","room":"q","version":0}"#, "version must be a version"),
        (#"{"type":"restore","ref":"r1","room":"q","version":-3}"#, "version must be a version"),
        (#"{"type":"restore","ref":"r1","room":"q","version":2.5}"#, "version must be an integer"),
        (#"{"type":"restore","ref":"r1","room":"q","version":"7"}"#, "version must be an integer"),
        (#"{"type":"restore","ref":"r1","room":"q","version":99999999999999999999}"#, "version"),
        (#"{"type":"roomHistory"}"#, "room is required"),
        (#"{"type":"roomHistory","room":"q","before":0}"#, "before must be a version"),
        (#"{"type":"roomHistory","room":"q","before":1.5}"#, "before must be an integer"),
        (#"{"type":"cursor","x":1,"y":2}"#, "room is required"),
        (#"{"type":"cursor","room":"q","x":1}"#, "y is required"),
        (#"{"type":"cursor","room":"q","y":1}"#, "x is required"),
        (#"{"type":"cursor","room":"q","x":"1","y":2}"#, "x must be a finite number"),
        (#"{"type":"cursor","room":"q","x":1,"y":1e999}"#, "y"),
        (#"{"type":"cursor","room":"q","x":1000.5,"y":2}"#, "on the board"),
        (#"{"type":"cursor","room":"q","x":-0.1,"y":2}"#, "on the board"),
        (#"{"type":"cursor","room":"q","x":5,"y":626}"#, "on the board"),
    ])
    func refusesMalformed(_ text: String, _ says: String) throws {
        let problem = try #require(refusal(text))
        #expect(problem.code == .invalidFrame)
        #expect(problem.message.contains(says), "\(problem.message)")
    }

    @Test func namesTheRefOfABadFrame() throws {
        let problem = try #require(refusal(#"{"type":"edit","ref":"r9","room":"q","op":"update","sticker":"s1"}"#))
        #expect(problem.ref == "r9")
    }

    @Test func unknownType() throws {
        let problem = try #require(refusal(#"{"type":"launch"}"#))
        #expect(problem.code == .unknownType)
        #expect(problem.message.contains("launch"))
    }

    @Test func oversized() throws {
        let text = #"{"type":"dm","ref":"r1","op":"message","peer":"bob","text":""# + String(repeating: "x", count: PageFrame.maxBytes) + #""}"#
        let problem = try #require(refusal(text))
        #expect(problem.code == .frameTooLarge)
    }

    @Test func dmTextOverItsLimit() throws {
        let text = #"{"type":"dm","ref":"r1","op":"message","peer":"bob","text":""# + String(repeating: "x", count: 4097) + #""}"#
        let problem = try #require(refusal(text))
        #expect(problem.code == .invalidFrame)
        #expect(problem.message.contains("4096"))
    }
}

/// Only this server's pages (and clients that are no browser) may open a WebSocket on
/// the cookie.
@Suite struct OriginTests {
    @Test(arguments: [
        (nil, "127.0.0.1:8080", true),
        ("http://127.0.0.1:8080", "127.0.0.1:8080", true),
        ("https://tandem.example", "tandem.example", true),
        ("ws://127.0.0.1", "127.0.0.1:8080", true),
        ("http://evil.example", "127.0.0.1:8080", false),
        ("http://127.0.0.1:9999", "127.0.0.1:8080", false),
        ("null", "127.0.0.1:8080", false),
        ("http://127.0.0.1:8080", nil, false),
    ] as [(String?, String?, Bool)])
    func sameOrigin(_ origin: String?, _ authority: String?, _ allowed: Bool) {
        #expect(WebServer.sameOrigin(origin: origin, authority: authority) == allowed)
    }
}

/// "Wrong username or password" only when the broker turned the account away.
@Suite struct SignInFailureTests {
    @Test(arguments: [
        ("the broker at 127.0.0.1:1883 refused the credentials of user 'alice' (Bad user name or password): check the username and password", true),
        ("the broker at 127.0.0.1:1883 refused a connection without credentials (Not authorized): give a username and a password", true),
        ("127.0.0.1:1883 took the connection and closed it without an MQTT answer (is that port an MQTT broker? a TLS listener needs --tls-ca-file)", false),
        ("the broker at 127.0.0.1:1883 refused the connection: Server unavailable", false),
    ])
    func refusedCredentials(_ reason: String, _ refused: Bool) {
        #expect(SessionStore.refusedCredentials(reason) == refused)
    }
}

/// A session that sends too fast waits; nothing is dropped.
@Suite struct PacerTests {
    @Test func burstGoesAtOnceThenFramesWait() {
        var pacer = TokenBucket(ratePerSecond: 10, burst: 3, now: 0)
        #expect((0..<3).map { _ in pacer.reserve(now: 0) } == [0, 0, 0])
        // The next ones are reserved ahead, 100 ms apart.
        #expect(pacer.reserve(now: 0) == 100)
        #expect(pacer.reserve(now: 0) == 200)
    }

    @Test func refillsWithTime() {
        var pacer = TokenBucket(ratePerSecond: 10, burst: 2, now: 0)
        _ = pacer.reserve(now: 0)
        _ = pacer.reserve(now: 0)
        #expect(pacer.reserve(now: 100) == 0)
        #expect(pacer.reserve(now: 100) == 100)
        // Idle time refills up to the burst, no further.
        #expect(pacer.reserve(now: 10_000) == 0)
        #expect(pacer.reserve(now: 10_000) == 0)
        #expect(pacer.reserve(now: 10_000) == 100)
    }
}

/// The frames the server sends about undo, history and cursors.
@Suite struct PageJSONTests {
    @Test func theRoomSaysWhatCanBeUndoneAndRedone() throws {
        let replica = RoomReplica(roomId: "q")
        let nothing = PageJSON.room(replica, undo: nil)
        #expect(nothing["canUndo"] == .bool(false))
        #expect(nothing["canRedo"] == .bool(false))

        // One accepted create of this person's: it can be undone, not redone.
        var history = UndoHistory()
        let create = EditEvent(eventId: "e1", type: .create, stickerId: "s1", timestamp: 1, image: "star", frame: Frame(x: 0, y: 0, width: 10, height: 10))
        history.sent(create, shown: nil)
        history.settled("e1", accepted: true)
        let frame = PageJSON.room(replica, undo: history)
        #expect(frame["canUndo"] == .bool(true))
        #expect(frame["canRedo"] == .bool(false))
    }

    @Test func anUndoResultSaysWhatHappened() {
        let nothing = PageJSON.undoResult(ref: "u1", room: "q", direction: .redo, receipt: nil)
        #expect(nothing["type"]?.stringValue == "undoResult")
        #expect(nothing["status"]?.stringValue == "nothing")
        #expect(nothing["op"]?.stringValue == "redo")
        #expect(nothing["message"]?.stringValue == "nothing to redo")
        #expect(nothing["code"] == .null)

        let refused = Receipt(id: "e2", kind: .room, status: .rejected, code: .ownedByOther, message: "sticker s1 is locked by alice", version: 7)
        let frame = PageJSON.undoResult(ref: "u2", room: "q", direction: .undo, receipt: refused, sticker: "s1", holder: "alice")
        #expect(frame["ref"]?.stringValue == "u2")
        #expect(frame["status"]?.stringValue == "rejected")
        #expect(frame["code"]?.stringValue == "owned_by_other")
        #expect(frame["sticker"]?.stringValue == "s1")
        #expect(frame["holder"]?.stringValue == "alice")
    }

    @Test func aHistoryPageSaysWhetherThereIsMore() {
        func entries(_ versions: ClosedRange<Int64>) -> [RoomHistoryAnswer.Entry] {
            versions.reversed().map { RoomHistoryAnswer.Entry(version: $0, eventId: "e\($0)", userId: "alice", type: .update, stickerId: "s1", timestamp: 1000 + $0) }
        }
        let full = PageJSON.roomHistory(RoomHistoryAnswer(roomId: "q", epoch: "ep", version: 60, oldest: 1, entries: entries(11...60)), before: nil, limit: 50)
        #expect(full["hasMore"] == .bool(true))
        #expect(full["before"] == .null)
        #expect(full["version"] == .int(60))
        guard case .array(let listed)? = full["entries"] else { Issue.record("no entries"); return }
        #expect(listed.count == 50)
        #expect(listed.first?["version"] == .int(60))
        #expect(listed.first?["userId"]?.stringValue == "alice")
        #expect(listed.first?["type"]?.stringValue == "update")
        #expect(listed.first?["timestamp"] == .int(1060))
        let last = PageJSON.roomHistory(RoomHistoryAnswer(roomId: "q", epoch: "ep", version: 60, oldest: 1, entries: entries(1...10)), before: 11, limit: 50)
        #expect(last["hasMore"] == .bool(false))
        #expect(last["before"] == .int(11))
        // A full page that reaches version 1 has nothing older.
        let exact = PageJSON.roomHistory(RoomHistoryAnswer(roomId: "q", epoch: "ep", version: 50, oldest: 1, entries: entries(1...50)), before: nil, limit: 50)
        #expect(exact["hasMore"] == .bool(false))
        let failed = PageJSON.roomHistoryError(room: "q", before: nil, code: "not_member", message: "not a member")
        #expect(failed["error"]?["code"]?.stringValue == "not_member")
    }

    @Test func aCursorFrameSaysWhereOrThatItLeft() {
        let at = PageJSON.cursor(room: "q", RoomCursor(userId: "bob", position: CursorPosition(x: 12.5, y: 300)))
        #expect(at["user"]?.stringValue == "bob")
        #expect(at["x"]?.doubleValue == 12.5)
        #expect(at["y"]?.doubleValue == 300)
        let left = PageJSON.cursor(room: "q", RoomCursor(userId: "bob", position: nil))
        #expect(left["x"] == .null)
        #expect(left["y"] == .null)
        #expect(left["room"]?.stringValue == "q")
    }
}

/// ``RoomFrames``: the bytes ``PageJSON/room(_:undo:)`` writes, the same buffer for every
/// tab that shows a version with the same undo state, a new one for a new version.
@Suite struct RoomFramesTests {
    private func replica(version: Int64) -> RoomReplica {
        var replica = RoomReplica(roomId: "q")
        let sticker = Sticker(id: "s1", image: "star", frame: Frame(x: 1, y: 2, width: 3, height: 4), owner: nil,
                              createdBy: "alice", updatedBy: "alice", updatedAt: 10)
        _ = replica.snapshot(RoomSnapshot(roomId: "q", epoch: "e", version: version, updatedAt: 10, stickers: [sticker]))
        return replica
    }

    private func text(_ frame: ByteBuffer) -> String { String(buffer: frame) }

    @Test func eachUndoStateHasItsFrameSharedByTheTabsShowingIt() {
        let frames = RoomFrames(metrics: WebMetrics())
        let five = replica(version: 5)
        for (canUndo, canRedo) in [(false, false), (true, false), (false, true), (true, true)] {
            let frame = frames.frame(five, canUndo: canUndo, canRedo: canRedo)
            guard case .object(var members) = PageJSON.roomBody(five) else { Issue.record("not an object"); return }
            members.append(JSON.Member("canUndo", .bool(canUndo)))
            members.append(JSON.Member("canRedo", .bool(canRedo)))
            let expected = String(decoding: JSON.object(members).serialized(), as: UTF8.self)
            #expect(text(frame) == expected)
            // Another tab showing the same version with the same undo state: the same bytes,
            // the same storage.
            let again = frames.frame(five, canUndo: canUndo, canRedo: canRedo)
            #expect(again == frame)
            #expect(again.withUnsafeReadableBytes { $0.baseAddress } == frame.withUnsafeReadableBytes { $0.baseAddress })
        }
        let six = frames.frame(replica(version: 6), canUndo: false, canRedo: false)
        #expect(text(six).contains(#""version":6"#))
        #expect(text(six) != text(frames.frame(five, canUndo: false, canRedo: false)))
    }

    /// A room's text written from the stickers' kept text is the text encoded whole, as
    /// the room changes: stickers moved, taken, made, deleted, one session's edit laid
    /// over, and stickers gone past the point where the kept ones are dropped.
    @Test func aBodyFromKeptStickersIsTheBodyEncodedWhole() throws {
        let frames = RoomFrames(metrics: WebMetrics())
        var version: Int64 = 0
        func sticker(_ id: String, x: Double) -> Sticker {
            Sticker(id: id, image: "star", frame: Frame(x: x, y: 2, width: 3, height: 4), owner: nil,
                    createdBy: "alice", updatedBy: "alice", updatedAt: 10)
        }
        var stickers = (0..<40).map { sticker("s\($0)", x: Double($0)) }
        func check(_ replica: RoomReplica, _ what: String) {
            let whole = PageJSON.roomBody(replica).serialized()
            #expect(frames.body(replica) == whole, "\(what)")
            // Twice: the second time every sticker from what the first kept.
            #expect(frames.body(replica) == whole, "\(what), again")
        }
        func snapshot() -> RoomReplica {
            version += 1
            var replica = RoomReplica(roomId: "q")
            _ = replica.snapshot(RoomSnapshot(roomId: "q", epoch: "e", version: version, updatedAt: 10, stickers: stickers))
            return replica
        }
        check(snapshot(), "forty stickers")
        stickers[7] = sticker("s7", x: 70)
        check(snapshot(), "one moved")
        stickers[8].owner = "bob"
        check(snapshot(), "one taken")
        stickers.append(sticker("new", x: 1))
        stickers.remove(at: 0)
        check(snapshot(), "one made, one deleted")
        // One session's update laid over the sticker it holds (pending: not shared).
        stickers[8].owner = "alice"
        var mine = snapshot()
        let predicted = mine.applyLocal(
            EditEvent(eventId: "e1", type: .update, stickerId: stickers[8].id, timestamp: 20, frame: Frame(x: 99, y: 9, width: 3, height: 4)), as: "alice")
        #expect(predicted == nil && mine.visibleSticker(stickers[8].id)?.frame.x == 99)
        check(mine, "an edit of one session's own laid over")
        check(snapshot(), "and the room as everyone sees it")
        // Most stickers gone: the kept ones are dropped, and the text stays right.
        stickers = Array(stickers.prefix(3))
        check(snapshot(), "three left")
        stickers = []
        check(snapshot(), "none left")
    }
}
