import Testing
@testable import TandemCore

/// A conversation between alice and bob, driven the way the coordinator drives it.
private struct Chat {
    var conversation = Conversation(key: ConversationKey("alice", "bob"))
    var counter = 0
    var clock: Millis = 1_000

    @discardableResult
    mutating func send(_ sender: String, _ type: DMCommand.Kind, _ text: String? = nil, to peer: String? = nil) -> DMOutcome {
        counter += 1
        clock += 10
        let peer = peer ?? (sender == "alice" ? "bob" : "alice")
        let command = DMCommand(commandId: "\(sender)-\(counter)", type: type, peer: peer, timestamp: clock, text: text)
        return conversation.apply(command, from: sender, now: clock + 1)
    }

    var statuses: (ConversationStatus?, ConversationStatus?) {
        (conversation.status(of: "alice"), conversation.status(of: "bob"))
    }
}

@Suite struct ConversationTests {
    @Test func keyIsCanonical() {
        #expect(ConversationKey("bob", "alice") == ConversationKey("alice", "bob"))
        #expect(ConversationKey("bob", "alice").low == "alice")
        // Byte order: uppercase sorts before lowercase.
        #expect(ConversationKey("alice", "Zed").low == "Zed")
        #expect(ConversationKey("alice", "bob").peer(of: "bob") == "alice")
    }

    @Test func requestCreatesTheConversationWithItsTextAsFirstMessage() throws {
        var chat = Chat()
        let outcome = chat.send("alice", .request, "hi bob")
        #expect(outcome.isAccepted && outcome.changed)
        #expect(outcome.version == 1)
        #expect(chat.statuses == (.pending, .received))
        let message = try #require(outcome.newMessages.first)
        #expect(message.id == "alice-1" && message.sender == "alice" && message.text == "hi bob" && message.sentAt == 1_010)
        #expect(chat.conversation.messages == [message])
        #expect(chat.conversation.view(of: "bob")?.unread == 1)
        #expect(chat.conversation.updatedAt == 1_011)
    }

    @Test func requestWithoutTextAddsNoMessage() {
        var chat = Chat()
        let outcome = chat.send("alice", .request)
        #expect(outcome.newMessages.isEmpty)
        #expect(chat.conversation.messages.isEmpty)
    }

    @Test func acceptAndDecline() {
        var chat = Chat()
        chat.send("alice", .request)
        #expect(chat.send("alice", .accept).rejection?.code == .noPendingRequest)
        let accepted = chat.send("bob", .accept)
        #expect(accepted.isAccepted && accepted.version == 2)
        #expect(chat.statuses == (.active, .active))
        #expect(chat.send("bob", .accept).rejection?.code == .noPendingRequest)

        var other = Chat()
        other.send("bob", .request)
        #expect(other.send("bob", .decline).rejection?.code == .noPendingRequest)
        #expect(other.send("alice", .decline).isAccepted)
        #expect(other.statuses == (.declined, .declined))
        #expect(other.send("alice", .decline).rejection == Rejection(.noPendingRequest, "bob has no request waiting for your answer"))
    }

    @Test func crossingRequestsActAsAccept() {
        var chat = Chat()
        chat.send("alice", .request, "hi")
        let crossing = chat.send("bob", .request, "hi to you")
        #expect(crossing.isAccepted && crossing.version == 2)
        #expect(chat.statuses == (.active, .active))
        #expect(crossing.newMessages.map(\.text) == ["hi to you"])
        #expect(chat.conversation.messages.map(\.text) == ["hi", "hi to you"])
    }

    @Test func repeatedRequests() {
        var chat = Chat()
        chat.send("alice", .request)
        let again = chat.send("alice", .request, "hello?")
        #expect(again.rejection?.code == .alreadyRequested)
        #expect(again.version == 1)
        #expect(chat.conversation.messages.isEmpty)
        chat.send("bob", .accept)
        #expect(chat.send("alice", .request).rejection?.code == .alreadyActive)
        #expect(chat.send("bob", .request).rejection?.code == .alreadyActive)
    }

    @Test(arguments: [DMCommand.Kind.decline, .leave])
    func requestAgainAfterDeclineOrLeave(_ ending: DMCommand.Kind) {
        var chat = Chat()
        chat.send("alice", .request, "one")
        chat.send("bob", ending)
        #expect(chat.statuses == (ending == .decline ? .declined : .left, ending == .decline ? .declined : .left))
        // Either side may ask again.
        let again = chat.send("bob", .request, "two")
        #expect(again.isAccepted && again.version == 3)
        #expect(chat.statuses == (.received, .pending))
        #expect(chat.conversation.messages.map(\.text) == ["one", "two"])
    }

    @Test func messagesOnlyWhileActive() {
        var chat = Chat()
        #expect(chat.send("alice", .message, "x").rejection?.code == .notActive)
        #expect(chat.send("alice", .message, "x").version == nil)
        chat.send("alice", .request)
        #expect(chat.send("alice", .message, "x").rejection?.code == .notActive)
        #expect(chat.send("bob", .message, "x").rejection?.code == .notActive)
        chat.send("bob", .accept)
        let sent = chat.send("bob", .message, "welcome")
        #expect(sent.isAccepted && sent.version == 3 && sent.newMessages.count == 1)
        chat.send("alice", .leave)
        #expect(chat.send("bob", .message, "x").rejection?.code == .notActive)
    }

    @Test(arguments: [ConversationStatus.active, .pending, .received])
    func leaveFromAnOpenView(_ status: ConversationStatus) {
        var chat = Chat()
        chat.send("alice", .request)
        if status == .active { chat.send("bob", .accept) }
        let leaver = status == .received ? "bob" : "alice"
        #expect(chat.conversation.status(of: leaver) == status)
        #expect(chat.send(leaver, .leave).isAccepted)
        #expect(chat.statuses == (.left, .left))
    }

    @Test func leaveFromAClosedView() {
        var chat = Chat()
        let none = chat.send("alice", .leave)
        #expect(none.rejection?.code == .notActive && none.version == nil)
        chat.send("alice", .request)
        chat.send("bob", .decline)
        #expect(chat.send("alice", .leave).rejection?.code == .notActive)
        chat.send("alice", .request)
        chat.send("alice", .leave)
        let twice = chat.send("bob", .leave)
        #expect(twice.rejection?.code == .notActive && twice.version == 4)
    }

    @Test func acceptAndDeclineWithoutAConversation() {
        var chat = Chat()
        for type in [DMCommand.Kind.accept, .decline] {
            let outcome = chat.send("bob", type)
            #expect(outcome.rejection?.code == .noPendingRequest)
            #expect(outcome.version == nil)
        }
        #expect(!chat.conversation.exists)
    }

    @Test(arguments: DMCommand.Kind.allCases)
    func selfConversationIsRejected(_ type: DMCommand.Kind) {
        var conversation = Conversation(key: ConversationKey("alice", "alice"))
        let command = DMCommand(commandId: "c", type: type, peer: "alice", timestamp: 1, text: "x")
        let outcome = conversation.apply(command, from: "alice", now: 2)
        #expect(outcome.rejection?.code == .selfConversation)
        #expect(outcome.version == nil)
        #expect(!conversation.exists)
    }

    @Test func readMarksThePeersMessagesReadForBothViews() throws {
        var chat = Chat()
        chat.send("alice", .request, "a1")
        chat.send("bob", .accept)
        chat.send("alice", .message, "a2")
        chat.send("bob", .message, "b1")
        #expect(chat.conversation.view(of: "bob")?.unread == 2)
        #expect(chat.conversation.view(of: "alice")?.unread == 1)

        let before = chat.conversation.messages
        let read = chat.send("bob", .read)
        #expect(read.isAccepted && read.changed && read.version == 5)
        #expect(read.markedRead == ["alice-1", "alice-3"])
        #expect(read.readFrom == "alice")
        #expect(read.newMessages.isEmpty)
        #expect(chat.conversation.view(of: "bob")?.unread == 0)
        #expect(chat.conversation.view(of: "alice")?.unread == 1)
        #expect(chat.conversation.messages.map(\.isRead) == [true, true, false])
        // A new copy, not an edit: the old value is untouched.
        #expect(before.map(\.isRead) == [false, false, false])
        #expect(before[0].markedRead() == chat.conversation.messages[0])

        let bobsSide = chat.conversation.conversationSnapshot(for: "bob", epoch: "e")
        let alicesSide = chat.conversation.conversationSnapshot(for: "alice", epoch: "e")
        #expect(bobsSide.messages == alicesSide.messages)
        #expect(bobsSide.unread == 0 && alicesSide.unread == 1)
    }

    @Test func readWithNothingUnreadChangesNothing() {
        var chat = Chat()
        chat.send("alice", .request, "hi")
        let own = chat.send("alice", .read)  // only her own message
        #expect(own.isAccepted && !own.changed && own.version == 1)
        #expect(chat.conversation.version == 1)
        #expect(chat.send("bob", .read).version == 2)
        let again = chat.send("bob", .read)
        #expect(again.isAccepted && !again.changed && again.version == 2 && again.markedRead.isEmpty)
    }

    @Test func readWorksInEveryStatus() {
        var chat = Chat()
        chat.send("alice", .request, "hi")
        chat.send("bob", .decline)
        let read = chat.send("bob", .read)
        #expect(read.isAccepted && read.changed)
    }

    @Test func readWithoutAConversationIsNotFound() {
        var chat = Chat()
        let outcome = chat.send("alice", .read)
        #expect(outcome.rejection?.code == .notFound)
        #expect(outcome.version == nil)
        #expect(outcome.receipt(id: "r1") == Receipt(id: "r1", kind: .dm, status: .rejected, code: .notFound, message: "there is no conversation with bob", version: nil))
    }

    @Test func rejectionsDoNotChangeAnything() {
        var chat = Chat()
        chat.send("alice", .request, "hi")
        let before = chat.conversation
        for (sender, type) in [("alice", DMCommand.Kind.request), ("alice", .accept), ("alice", .decline), ("alice", .message), ("bob", .message)] {
            let outcome = chat.send(sender, type, "x")
            #expect(!outcome.isAccepted && !outcome.changed && outcome.version == 1)
        }
        #expect(chat.conversation == before)
    }

    @Test func keepsTheLatest200MessagesAndCountsUnreadOverAll() {
        var chat = Chat()
        chat.send("alice", .request)
        chat.send("bob", .accept)
        for i in 0..<250 { chat.send("alice", .message, "m\(i)") }
        #expect(chat.conversation.messages.count == Conversation.windowSize)
        #expect(chat.conversation.messages.first?.text == "m50")
        #expect(chat.conversation.messages.last?.text == "m249")
        #expect(chat.conversation.view(of: "bob")?.unread == 250)
        #expect(chat.conversation.version == 252)
        let read = chat.send("bob", .read)
        #expect(read.markedRead.count == 200)
        #expect(read.readFrom == "alice")
    }

    @Test func receiptForAnAcceptedCommand() {
        var chat = Chat()
        #expect(chat.send("alice", .request).receipt(id: "c1") == .accepted(id: "c1", kind: .dm, version: 1))
    }
}

@Suite struct ConversationWireTests {
    private func activeChat() -> Chat {
        var chat = Chat()
        chat.send("bob", .request, "hey \"alice\"")
        chat.send("alice", .accept)
        chat.send("alice", .message, "hi")
        return chat
    }

    @Test func snapshotMatchesTheContract() {
        let chat = activeChat()
        let text = chat.conversation.snapshot(for: "alice", epoch: "ep1").text
        #expect(text == #"{"user":"alice","peer":"bob","epoch":"ep1","status":"active","version":3,"updatedAt":1031,"unread":1,"#
            + #""messages":[{"id":"bob-1","sender":"bob","text":"hey \"alice\"","sentAt":1010,"isRead":false},"#
            + #"{"id":"alice-3","sender":"alice","text":"hi","sentAt":1030,"isRead":false}]}"#)
    }

    @Test func snapshotDecodesBack() throws {
        let chat = activeChat()
        let snapshot = chat.conversation.conversationSnapshot(for: "bob", epoch: "ep1")
        #expect(try ConversationSnapshot.decode(snapshot.json.serialized()) == snapshot)
        #expect(snapshot.unread == 1 && snapshot.peer == "alice")
    }

    @Test func snapshotDecoderIsLenient() throws {
        let text = #"{"user":"alice","peer":"bob","status":"received","version":2,"future":true,"#
            + #""messages":[{"id":"m1","sender":"bob","text":"x","sentAt":5},{"broken":1}]}"#
        let snapshot = try ConversationSnapshot.decode(Array(text.utf8))
        #expect(snapshot.epoch == "" && snapshot.updatedAt == 0)
        #expect(snapshot.messages.count == 1)
        #expect(snapshot.unread == 1)
        #expect(throws: Rejection.self) { try ConversationSnapshot.decode(Array(#"{"user":"alice"}"#.utf8)) }
    }

    @Test func persistedFormRoundTripsWithStoredMessages() throws {
        let chat = activeChat()
        let json = try JSON.parse(chat.conversation.persisted().text)
        #expect(json["messages"] == nil)
        let restored = try Conversation(persisted: json, messages: chat.conversation.messages)
        #expect(restored == chat.conversation)
        let bare = try Conversation(persisted: json)
        #expect(bare.messages.isEmpty && bare.version == 3)
        #expect(bare.withMessages(chat.conversation.messages) == chat.conversation)
    }

    @Test func aMissingConversationPersistsAsSuch() throws {
        let empty = Conversation(key: ConversationKey("bob", "alice"))
        #expect(try Conversation(persisted: empty.persisted()) == empty)
    }

    @Test func rebuildingKeepsTheLatestWindow() throws {
        let stored = (0..<300).map { DirectMessage(id: "m\($0)", sender: "alice", text: "t", sentAt: Millis($0)) }
        let chat = activeChat()
        let rebuilt = chat.conversation.withMessages(stored)
        #expect(rebuilt.messages.count == 200 && rebuilt.messages.first?.id == "m100")
    }

    @Test func persistedFormIsChecked() {
        let bad = JSON.obj(["low": "alice", "high": "bob", "lowView": .obj(["status": "active", "unread": 0]), "highView": nil, "version": 1, "updatedAt": 0])
        #expect(throws: Rejection.self) { try Conversation(persisted: bad) }
    }
}
