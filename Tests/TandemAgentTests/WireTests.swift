import Testing
import TandemAgent
import TandemCore

@Suite struct WireTests {
    @Test func receiptRoundTrip() throws {
        let text = #"{"id":"a-1","kind":"room","status":"rejected","code":"owned_by_other","message":"held by bob","version":4,"extra":1}"#
        let r = try Receipt.decode(Array(text.utf8))
        #expect(r == Receipt(id: "a-1", kind: .room, status: .rejected, code: .ownedByOther, message: "held by bob", version: 4))
        #expect(r.json.text == #"{"id":"a-1","kind":"room","status":"rejected","code":"owned_by_other","message":"held by bob","version":4}"#)
    }

    @Test func receiptWithNullsAndAnUnknownCode() throws {
        let r = try Receipt.decode(Array(#"{"id":"x","kind":"dm","status":"duplicate","code":"brand_new","version":null}"#.utf8))
        #expect(r.code == nil)
        #expect(r.version == nil)
        #expect(r.message == "")
        #expect(r.isAcknowledgement)
    }

    @Test(arguments: [#"[]"#, #"{"id":"x","kind":"chat","status":"accepted"}"#, #"{"kind":"dm","status":"accepted"}"#, "{"])
    func unreadableReceipts(text: String) {
        #expect(throws: Rejection.self) { try Receipt.decode(Array(text.utf8)) }
    }

    @Test func historyAndLogbookRequests() {
        #expect(DMHistoryPage.request(requestId: "r1", peer: "bob", before: 5, limit: 10).text
                == #"{"requestId":"r1","type":"dmHistory","peer":"bob","before":5,"limit":10}"#)
        #expect(DMHistoryPage.request(requestId: "r1", peer: "bob", before: nil, limit: nil).text
                == #"{"requestId":"r1","type":"dmHistory","peer":"bob"}"#)
        #expect(LogbookEntry.request(requestId: "r2", limit: 3).text == #"{"requestId":"r2","type":"logbook","limit":3}"#)
    }

    @Test func logbookResponse() throws {
        let json = try JSON.parse(#"{"requestId":"r2","type":"logbook","workouts":[{"workoutId":"w1","startedAt":1,"endedAt":2,"origin":"watch","mode":"mirrored","summary":{"distance":1000,"elapsedTime":330,"averagePace":330,"averageHeartRate":null,"maxHeartRate":null}}]}"#)
        let entries = try LogbookEntry.entries(of: json)
        #expect(entries.count == 1)
        #expect(entries[0].summary?.averagePace == 330)
        #expect(LogbookEntry.table(entries).contains("w1"))
    }

    /// Issue 14: the logbook printed 127.9 where the agent's own summary said 128.
    @Test func theLogbookRoundsHeartRateAsTheSummaryDoes() throws {
        let json = try JSON.parse(#"{"requestId":"r2","type":"logbook","workouts":[{"workoutId":"w1","startedAt":1,"endedAt":2,"origin":"watch","mode":"mirrored","summary":{"distance":1000,"elapsedTime":330,"averagePace":330,"averageHeartRate":127.9,"maxHeartRate":160.4}}]}"#)
        let table = LogbookEntry.table(try LogbookEntry.entries(of: json))
        #expect(table.contains("128") && table.contains("160"), "\(table)")
        #expect(!table.contains("127.9"), "\(table)")
    }

    @Test func aScriptWithATypoExitsAsABadInvocation() {
        #expect(AgentExit.code(badLines: 1, rejected: 0, abandoned: 0) == 64)
        #expect(AgentExit.code(badLines: 1, rejected: 2, abandoned: 0) == 64)
        #expect(AgentExit.code(badLines: 0, rejected: 1, abandoned: 0) == 1)
        #expect(AgentExit.code(badLines: 0, rejected: 0, abandoned: 1) == 1)
        #expect(AgentExit.code(badLines: 0, rejected: 0, abandoned: 0) == 0)
    }

    @Test func typedPutsTheTypeFirst() {
        #expect(JSON.obj(["a": 1, "type": "x"]).typed("receipt").text == #"{"type":"receipt","a":1}"#)
    }
}

@Suite struct ConversationBookTests {
    func snapshot(version: Int64, status: ConversationStatus, messages: [DirectMessage], epoch: String = "e1") -> ConversationSnapshot {
        ConversationSnapshot(user: "alice", peer: "bob", epoch: epoch, status: status, version: version, updatedAt: 1,
                             unread: 0, messages: messages)
    }

    @Test func reportsStatusChangesNewMessagesAndReads() throws {
        var book = ConversationBook(user: "alice")
        let m1 = DirectMessage(id: "m1", sender: "alice", text: "hi", sentAt: 1)
        let first = book.update(with: snapshot(version: 1, status: .pending, messages: [m1]))
        #expect(first == [.appeared(peer: "bob", status: .pending), .message(peer: "bob", m1)])
        let m2 = DirectMessage(id: "m2", sender: "bob", text: "yo", sentAt: 2)
        let taken = book.update(with: snapshot(version: 3, status: .active, messages: [m1.markedRead(), m2]))
        let updates = try #require(taken)
        #expect(updates == [.statusChanged(peer: "bob", from: .pending, to: .active), .message(peer: "bob", m2), .readByPeer(peer: "bob", count: 1)])
    }

    @Test func ignoresOlderSnapshotsButTakesANewEpoch() {
        var book = ConversationBook(user: "alice")
        _ = book.update(with: snapshot(version: 5, status: .active, messages: []))
        let older = book.update(with: snapshot(version: 4, status: .left, messages: []))
        let same = book.update(with: snapshot(version: 5, status: .left, messages: []))
        let newEpoch = book.update(with: snapshot(version: 1, status: .pending, messages: [], epoch: "e2"))
        #expect(older == nil)
        #expect(same == nil)
        #expect(newEpoch == [.appeared(peer: "bob", status: .pending)])
        #expect(book.conversations["bob"]?.status == .pending)
    }
}

@Suite struct RouteReplayTests {
    @Test func replaysInWallClockTime() {
        let fixes = (0..<5).map { GPSFix(time: 1_000_000 + Int64($0) * 1_000, latitude: 51, longitude: 0) }
        var replay = RouteReplay(fixes: fixes)
        replay.start(at: 50_000)
        #expect(replay.due(at: 50_000).map(\.time) == [50_000])
        #expect(replay.due(at: 52_500).map(\.time) == [51_000, 52_000])
        #expect(!replay.isFinished)
        #expect(replay.due(at: 60_000).count == 2)
        #expect(replay.isFinished)
    }
}
