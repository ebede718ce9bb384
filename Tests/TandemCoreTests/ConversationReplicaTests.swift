import Testing
import TandemCore

@Suite struct ConversationReplicaTests {
    func message(_ id: String, _ sender: String = "alice", read: Bool = false) -> DirectMessage {
        DirectMessage(id: id, sender: sender, text: "t\(id)", sentAt: 1, isRead: read)
    }

    func snapshot(version: Int64, epoch: String = "e1", status: ConversationStatus = .active, unread: Int = 0, messages: [DirectMessage] = []) -> ConversationSnapshot {
        ConversationSnapshot(user: "bob", peer: "alice", epoch: epoch, status: status, version: version, updatedAt: 5, unread: unread, messages: messages)
    }

    func changes(from: Int64, to: Int64, epoch: String = "e1", status: ConversationStatus = .active, unread: Int = 0, _ list: [ConversationChange]) -> ConversationChanges {
        ConversationChanges(user: "bob", peer: "alice", epoch: epoch, fromVersion: from, toVersion: to, status: status, unread: unread, changes: list)
    }

    @Test func appliesAChainAndTakesReadCopiesInPlace() {
        var r = ConversationReplica(snapshot: snapshot(version: 2, messages: [message("m1")]))
        do { let outcome = r.apply(changes(from: 2, to: 3, unread: 2, [ConversationChange(version: 3, commandId: "m2", sender: "alice", type: .message, messages: [message("m2")])])); #expect(outcome == .applied) }
        #expect(r.messages.map(\.id) == ["m1", "m2"] && r.unread == 2 && r.version == 3)
        do { let outcome = r.apply(changes(from: 3, to: 4, unread: 0, [ConversationChange(version: 4, commandId: "r1", sender: "bob", type: .read, messages: [message("m1", read: true), message("m2", read: true)])])); #expect(outcome == .applied) }
        #expect(r.messages.map(\.isRead) == [true, true] && r.unread == 0)
        do { let outcome = r.apply(changes(from: 4, to: 5, status: .left, [ConversationChange(version: 5, commandId: "l", sender: "alice", type: .leave, messages: [])])); #expect(outcome == .applied) }
        #expect(r.status == .left && r.snapshot?.version == 5)
    }

    @Test func aGapIsSaidAndStaleChangesAreIgnored() {
        var r = ConversationReplica(user: "bob", peer: "alice")
        // Nothing held yet: a gap.
        do { let outcome = r.apply(changes(from: 0, to: 1, [])); #expect(outcome == .gap) }
        r.snapshot(snapshot(version: 3))
        do { let outcome = r.apply(changes(from: 4, to: 5, [])); #expect(outcome == .gap) }
        #expect(r.version == 3)
        do { let outcome = r.apply(changes(from: 2, to: 3, [])); #expect(outcome == .ignored) }
        do { let outcome = r.snapshot(snapshot(version: 5, messages: [message("m9")])); #expect(outcome) }
        #expect(r.messages.map(\.id) == ["m9"])
        do { let outcome = r.snapshot(snapshot(version: 4)); #expect(!outcome) }
        // Another view's changes are not this replica's.
        var other = changes(from: 5, to: 6, [])
        other.user = "carol"
        do { let outcome = r.apply(other); #expect(outcome == .ignored) }
    }

    @Test func aNewEpochThrowsAwayWhatWasHeld() {
        var r = ConversationReplica(snapshot: snapshot(version: 9, messages: [message("m1")]))
        // Changes of a new epoch: a gap until its snapshot.
        do { let outcome = r.apply(changes(from: 0, to: 1, epoch: "e2", [])); #expect(outcome == .gap) }
        do { let outcome = r.snapshot(snapshot(version: 1, epoch: "e2", status: .pending)); #expect(outcome) }
        #expect(r.version == 1 && r.messages.isEmpty && r.status == .pending && r.epoch == "e2")
    }

    /// A snapshot carries only the latest 20: what is held before its first message stays,
    /// with the read marks the snapshot implies (the unread of each side are its latest).
    @Test func aShortSnapshotKeepsOlderHeldMessagesWithTheirReadMarks() {
        // bob holds m1..m4 from alice (unread) and b1 of his own (unread by alice).
        var r = ConversationReplica(snapshot: snapshot(version: 5, unread: 4, messages: [
            message("m1"), message("m2"), message("b1", "bob"), message("m3"), message("m4"),
        ]))
        // A later snapshot starting at m3: bob read up to m3 (so m1, m2 too), m5 new and
        // unread; alice read b1 (so his older ones too).
        do { let taken = r.snapshot(snapshot(version: 8, unread: 1, messages: [
            message("m3", read: true), message("m4", read: true), message("b2", "bob", read: true), message("m5"),
        ])); #expect(taken) }
        #expect(r.messages.map(\.id) == ["m1", "m2", "b1", "m3", "m4", "b2", "m5"])
        #expect(r.messages.map(\.isRead) == [true, true, true, true, true, true, false])

        // Unread beyond the snapshot's: the newest of the held ones from alice stay unread.
        var u = ConversationReplica(snapshot: snapshot(version: 3, unread: 2, messages: [message("m1", read: true), message("m2"), message("m3")]))
        do { let taken = u.snapshot(snapshot(version: 4, unread: 3, messages: [message("m3"), message("m4")])); #expect(taken) }
        #expect(u.messages.map(\.id) == ["m1", "m2", "m3", "m4"])
        #expect(u.messages.map(\.isRead) == [true, false, false, false])

        // A snapshot whose first message is not held: what lies between is unknown, so
        // nothing older is kept (history pages it).
        var g = ConversationReplica(snapshot: snapshot(version: 3, messages: [message("m1")]))
        do { let taken = g.snapshot(snapshot(version: 9, messages: [message("m7"), message("m8")])); #expect(taken) }
        #expect(g.messages.map(\.id) == ["m7", "m8"])
    }

    @Test func theWindowKeepsTheLatestMessages() {
        var r = ConversationReplica(snapshot: snapshot(version: 1, messages: (0..<Conversation.windowSize).map { message("m\($0)") }))
        do { let outcome = r.apply(changes(from: 1, to: 2, [ConversationChange(version: 2, commandId: "x", sender: "alice", type: .message, messages: [message("x")])])); #expect(outcome == .applied) }
        #expect(r.messages.count == Conversation.windowSize)
        #expect(r.messages.first?.id == "m1" && r.messages.last?.id == "x")
    }

    @Test func changesRoundTripThroughTheWire() throws {
        let c = changes(from: 1, to: 2, unread: 1, [ConversationChange(version: 2, commandId: "m", sender: "alice", type: .message, messages: [message("m")])])
        #expect(try ConversationChanges.decode(c.json.serialized()) == c)
        #expect(throws: Rejection.self) { try ConversationChanges.decode(Array("{\"user\":1}".utf8)) }
    }
}
