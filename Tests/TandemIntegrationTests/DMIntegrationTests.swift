import Foundation
import Testing
import TandemCore
import TandemMQTT
import TestSupport

/// Direct messages end to end (issue 4, "Done when"): the real mosquitto with the shipped
/// broker-config, the built `tandem-coordinator`, and users as TestPeers. Every check
/// reads what goes over the broker: receipts, the retained ConversationSnapshots of both
/// participants, and the request/response history protocol.
@Suite(.serialized) struct DMIntegrationTests {
    let topics = Topics()

    // MARK: 1. The full lifecycle

    @Test func fullLifecycleRequestAcceptChatReadLeave() async throws {
        try await withChat { broker, coordinator, alice, bob in
            let t0 = nowMillis() - 60_000

            // alice asks, with a first message.
            try await alice.dm(.dm("a-req", "request", peer: "bob", at: t0 + 1, text: "hi bob"))
            try expectReceipt(try await alice.receipt("a-req"), "accepted", version: 1)
            var a = try await view(alice, of: "bob", version: 1)
            var b = try await view(bob, of: "alice", version: 1)
            #expect(a["user"]?.stringValue == "alice")
            #expect(a["peer"]?.stringValue == "bob")
            #expect(b["user"]?.stringValue == "bob")
            #expect(b["peer"]?.stringValue == "alice")
            #expect(a["status"]?.stringValue == "pending")
            #expect(b["status"]?.stringValue == "received")
            let epoch = try #require(a["epoch"]?.stringValue)
            #expect(!epoch.isEmpty)
            #expect(b["epoch"]?.stringValue == epoch)
            #expect(a["unread"]?.int64Value == 0)
            #expect(b["unread"]?.int64Value == 1)
            let first = Msg("a-req", "alice", "hi bob", t0 + 1, read: false)
            #expect(messages(a) == [first])
            #expect(messages(b) == [first])

            // bob accepts.
            try await bob.dm(.dm("b-acc", "accept", peer: "alice", at: t0 + 2))
            try expectReceipt(try await bob.receipt("b-acc"), "accepted", version: 2)
            a = try await view(alice, of: "bob", version: 2)
            b = try await view(bob, of: "alice", version: 2)
            #expect(a["status"]?.stringValue == "active")
            #expect(b["status"]?.stringValue == "active")

            // Messages both ways.
            try await bob.dm(.dm("b-m1", "message", peer: "alice", at: t0 + 3, text: "hello alice"))
            try expectReceipt(try await bob.receipt("b-m1"), "accepted", version: 3)
            try await alice.dm(.dm("a-m1", "message", peer: "bob", at: t0 + 4, text: "how are you?"))
            try expectReceipt(try await alice.receipt("a-m1"), "accepted", version: 4)
            a = try await view(alice, of: "bob", version: 4)
            b = try await view(bob, of: "alice", version: 4)
            let chat = [
                first,
                Msg("b-m1", "bob", "hello alice", t0 + 3, read: false),
                Msg("a-m1", "alice", "how are you?", t0 + 4, read: false),
            ]
            #expect(messages(a) == chat)
            #expect(messages(b) == chat)
            #expect(a["unread"]?.int64Value == 1)
            #expect(b["unread"]?.int64Value == 2)

            // bob reads: alice, the sender, sees her messages read; bob's unread goes to 0.
            try await bob.dm(.dm("b-read", "read", peer: "alice", at: t0 + 5))
            try expectReceipt(try await bob.receipt("b-read"), "accepted", version: 5)
            a = try await view(alice, of: "bob", version: 5)
            b = try await view(bob, of: "alice", version: 5)
            let readByBob = [chat[0].read(), chat[1], chat[2].read()]
            #expect(messages(a) == readByBob)
            #expect(messages(b) == readByBob)
            #expect(b["unread"]?.int64Value == 0)
            #expect(a["unread"]?.int64Value == 1)

            // alice reads bob's message.
            try await alice.dm(.dm("a-read", "read", peer: "bob", at: t0 + 6))
            try expectReceipt(try await alice.receipt("a-read"), "accepted", version: 6)
            a = try await view(alice, of: "bob", version: 6)
            b = try await view(bob, of: "alice", version: 6)
            let allRead = chat.map { $0.read() }
            #expect(messages(a) == allRead)
            #expect(messages(b) == allRead)
            #expect(a["unread"]?.int64Value == 0)

            // Nothing unread: accepted, nothing changes.
            try await alice.dm(.dm("a-read2", "read", peer: "bob", at: t0 + 7))
            try expectReceipt(try await alice.receipt("a-read2"), "accepted", version: 6)

            // bob leaves; nobody can write any more.
            try await bob.dm(.dm("b-leave", "leave", peer: "alice", at: t0 + 8))
            try expectReceipt(try await bob.receipt("b-leave"), "accepted", version: 7)
            a = try await view(alice, of: "bob", version: 7)
            b = try await view(bob, of: "alice", version: 7)
            #expect(a["status"]?.stringValue == "left")
            #expect(b["status"]?.stringValue == "left")
            #expect(messages(a) == allRead)

            try await alice.dm(.dm("a-m2", "message", peer: "bob", at: t0 + 9, text: "are you there?"))
            try expectReceipt(try await alice.receipt("a-m2"), "rejected", code: "not_active", version: 7)
            try await bob.dm(.dm("b-m2", "message", peer: "alice", at: t0 + 10, text: "bye"))
            try expectReceipt(try await bob.receipt("b-m2"), "rejected", code: "not_active", version: 7)

            // One version counter shared by both views, growing with every change.
            for (peer, other) in [(alice, "bob"), (bob, "alice")] {
                let versions = peer.all(on: topics.conversation(user: peer.user, peer: other)).compactMap { $0["version"]?.int64Value }
                #expect(versions == versions.sorted() && Set(versions).count == versions.count, "\(peer.user) heard \(versions)")
                #expect(versions.last == 7)
                #expect(peer.all(on: topics.conversation(user: peer.user, peer: other)).allSatisfy { $0["epoch"]?.stringValue == epoch })
            }
            // The rejected messages did not reach the snapshots.
            #expect(messages(try await view(alice, of: "bob", version: 7)) == allRead)
        }
    }

    // MARK: 2. A message before accept

    @Test func aMessageBeforeAcceptIsRejectedNotActive() async throws {
        try await withChat { broker, coordinator, alice, bob in
            let t0 = nowMillis() - 60_000

            // No conversation at all: not_active, and no version yet.
            try await alice.dm(.dm("a-early", "message", peer: "bob", at: t0, text: "psst"))
            try expectReceipt(try await alice.receipt("a-early"), "rejected", code: "not_active", version: nil)

            try await alice.dm(.dm("a-req", "request", peer: "bob", at: t0 + 1))
            try expectReceipt(try await alice.receipt("a-req"), "accepted", version: 1)

            // Neither the asker (pending) nor the asked (received) may write yet.
            try await alice.dm(.dm("a-m1", "message", peer: "bob", at: t0 + 2, text: "well?"))
            try expectReceipt(try await alice.receipt("a-m1"), "rejected", code: "not_active", version: 1)
            try await bob.dm(.dm("b-m1", "message", peer: "alice", at: t0 + 3, text: "who is this?"))
            try expectReceipt(try await bob.receipt("b-m1"), "rejected", code: "not_active", version: 1)

            let a = try await view(alice, of: "bob", version: 1)
            let b = try await view(bob, of: "alice", version: 1)
            #expect(a["status"]?.stringValue == "pending")
            #expect(b["status"]?.stringValue == "received")
            #expect(messages(a).isEmpty)
            #expect(messages(b).isEmpty)
            #expect(b["unread"]?.int64Value == 0)

            // After accept the same kind of message goes through.
            try await bob.dm(.dm("b-acc", "accept", peer: "alice", at: t0 + 4))
            try expectReceipt(try await bob.receipt("b-acc"), "accepted", version: 2)
            try await alice.dm(.dm("a-m2", "message", peer: "bob", at: t0 + 5, text: "hi"))
            try expectReceipt(try await alice.receipt("a-m2"), "accepted", version: 3)
            #expect(messages(try await view(bob, of: "alice", version: 3)) == [Msg("a-m2", "alice", "hi", t0 + 5, read: false)])
        }
    }

    // MARK: 3. Crossing requests

    @Test func crossingRequestsBecomeActive() async throws {
        try await withChat { broker, coordinator, alice, bob in
            let t0 = nowMillis() - 60_000

            // Both ask at once, neither having seen the other's request.
            async let sentByAlice: Void = alice.dm(.dm("a-req", "request", peer: "bob", at: t0 + 1, text: "coffee?"))
            async let sentByBob: Void = bob.dm(.dm("b-req", "request", peer: "alice", at: t0 + 2, text: "lunch?"))
            _ = try await (sentByAlice, sentByBob)
            let ra = try await alice.receipt("a-req")
            let rb = try await bob.receipt("b-req")
            #expect(ra["status"]?.stringValue == "accepted", "\(ra.text)")
            #expect(rb["status"]?.stringValue == "accepted", "\(rb.text)")
            #expect(Set([ra["version"]?.int64Value, rb["version"]?.int64Value]) == [1, 2])

            let a = try await view(alice, of: "bob", version: 2)
            let b = try await view(bob, of: "alice", version: 2)
            #expect(a["status"]?.stringValue == "active")
            #expect(b["status"]?.stringValue == "active")
            let expected: Set<Msg> = [
                Msg("a-req", "alice", "coffee?", t0 + 1, read: false),
                Msg("b-req", "bob", "lunch?", t0 + 2, read: false),
            ]
            #expect(Set(messages(a)) == expected)
            #expect(messages(a) == messages(b))
            #expect(a["unread"]?.int64Value == 1)
            #expect(b["unread"]?.int64Value == 1)

            // Active means active: messages flow.
            try await bob.dm(.dm("b-m1", "message", peer: "alice", at: t0 + 3, text: "both, then"))
            try expectReceipt(try await bob.receipt("b-m1"), "accepted", version: 3)
        }
    }

    // MARK: 4. Decline, then a new request

    @Test func declineThenANewRequest() async throws {
        try await withChat { broker, coordinator, alice, bob in
            let t0 = nowMillis() - 60_000

            try await alice.dm(.dm("a-req1", "request", peer: "bob", at: t0 + 1, text: "hi"))
            try expectReceipt(try await alice.receipt("a-req1"), "accepted", version: 1)
            try await bob.dm(.dm("b-dec", "decline", peer: "alice", at: t0 + 2))
            try expectReceipt(try await bob.receipt("b-dec"), "accepted", version: 2)
            var a = try await view(alice, of: "bob", version: 2)
            var b = try await view(bob, of: "alice", version: 2)
            #expect(a["status"]?.stringValue == "declined")
            #expect(b["status"]?.stringValue == "declined")

            // Declined is not active, and there is nothing left to answer.
            try await alice.dm(.dm("a-m1", "message", peer: "bob", at: t0 + 3, text: "please?"))
            try expectReceipt(try await alice.receipt("a-m1"), "rejected", code: "not_active", version: 2)
            try await bob.dm(.dm("b-acc1", "accept", peer: "alice", at: t0 + 4))
            try expectReceipt(try await bob.receipt("b-acc1"), "rejected", code: "no_pending_request", version: 2)

            // A new request from a declined view starts over.
            try await alice.dm(.dm("a-req2", "request", peer: "bob", at: t0 + 5, text: "second try"))
            try expectReceipt(try await alice.receipt("a-req2"), "accepted", version: 3)
            a = try await view(alice, of: "bob", version: 3)
            b = try await view(bob, of: "alice", version: 3)
            #expect(a["status"]?.stringValue == "pending")
            #expect(b["status"]?.stringValue == "received")
            let history = [
                Msg("a-req1", "alice", "hi", t0 + 1, read: false),
                Msg("a-req2", "alice", "second try", t0 + 5, read: false),
            ]
            #expect(messages(a) == history)
            #expect(messages(b) == history)

            // This time bob accepts.
            try await bob.dm(.dm("b-acc2", "accept", peer: "alice", at: t0 + 6))
            try expectReceipt(try await bob.receipt("b-acc2"), "accepted", version: 4)
            a = try await view(alice, of: "bob", version: 4)
            #expect(a["status"]?.stringValue == "active")
        }
    }

    // MARK: 5. Restart keeps every conversation and message

    @Test(arguments: ["SIGTERM", "SIGKILL"])
    func aRestartKeepsEveryConversationAndMessage(signal: String) async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--conversation-snapshot-seconds", "1"])
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            let carol = try await TestPeer.connect(broker: broker, user: "carol")
            let t0 = nowMillis() - 60_000

            // alice and bob: active, messages both ways, bob has read alice's.
            try await alice.dm(.dm("a-req", "request", peer: "bob", at: t0 + 1, text: "hi bob"))
            try expectReceipt(try await alice.receipt("a-req"), "accepted", version: 1)
            try await bob.dm(.dm("b-acc", "accept", peer: "alice", at: t0 + 2))
            try expectReceipt(try await bob.receipt("b-acc"), "accepted", version: 2)
            try await bob.dm(.dm("b-m1", "message", peer: "alice", at: t0 + 3, text: "hi alice"))
            try expectReceipt(try await bob.receipt("b-m1"), "accepted", version: 3)
            try await alice.dm(.dm("a-m1", "message", peer: "bob", at: t0 + 4, text: "news?"))
            try expectReceipt(try await alice.receipt("a-m1"), "accepted", version: 4)
            try await bob.dm(.dm("b-read", "read", peer: "alice", at: t0 + 5))
            try expectReceipt(try await bob.receipt("b-read"), "accepted", version: 5)
            // carol asked alice; alice has not answered.
            try await carol.dm(.dm("c-req", "request", peer: "alice", at: t0 + 6, text: "remember me?"))
            try expectReceipt(try await carol.receipt("c-req"), "accepted", version: 1)

            let before = try await view(alice, of: "bob", version: 5)
            let epoch = try #require(before["epoch"]?.stringValue)
            let chat = [
                Msg("a-req", "alice", "hi bob", t0 + 1, read: true),
                Msg("b-m1", "bob", "hi alice", t0 + 3, read: false),
                Msg("a-m1", "alice", "news?", t0 + 4, read: true),
            ]
            #expect(messages(before) == chat)

            if signal == "SIGKILL" {
                await coordinator.kill()
            } else {
                #expect(await coordinator.stop() == 0)
            }
            // bob writes while the coordinator is down: its persistent session keeps the command.
            try await bob.dm(.dm("b-down", "message", peer: "alice", at: t0 + 7, text: "while you were out"))
            try await coordinator.start()
            try expectReceipt(try await bob.receipt("b-down", timeout: .seconds(20)), "accepted", version: 6)

            // A new message continues the version; the snapshot still holds the old ones,
            // read marks included.
            try await alice.dm(.dm("a-m2", "message", peer: "bob", at: t0 + 8, text: "after the restart"))
            try expectReceipt(try await alice.receipt("a-m2"), "accepted", version: 7)
            let after = try await view(bob, of: "alice", version: 7)
            let continued = chat + [
                Msg("b-down", "bob", "while you were out", t0 + 7, read: false),
                Msg("a-m2", "alice", "after the restart", t0 + 8, read: false),
            ]
            #expect(messages(after) == continued)
            #expect(after["status"]?.stringValue == "active")
            #expect(after["epoch"]?.stringValue == epoch)
            #expect(after["unread"]?.int64Value == 1)

            // The pending request survived too: alice can still accept it.
            try await alice.dm(.dm("a-acc-c", "accept", peer: "carol", at: t0 + 9))
            try expectReceipt(try await alice.receipt("a-acc-c"), "accepted", version: 2)
            let carolsView = try await view(carol, of: "alice", version: 2)
            #expect(carolsView["status"]?.stringValue == "active")
            #expect(messages(carolsView) == [Msg("c-req", "carol", "remember me?", t0 + 6, read: false)])

            // Command ids are still remembered.
            try await bob.dm(.dm("b-m1", "message", peer: "alice", at: t0 + 3, text: "hi alice"))
            let duplicate = try await bob.receipt("b-m1", count: 2)
            try expectReceipt(duplicate, "duplicate", version: 7)

            // A phone that connects now sees every conversation from the retained snapshots.
            let alicesPhone = try await TestPeer.connect(broker: broker, user: "alice")
            let withBob = try await view(alicesPhone, of: "bob", version: 7)
            #expect(messages(withBob) == continued)
            #expect(withBob["status"]?.stringValue == "active")
            #expect(withBob["unread"]?.int64Value == 2)
            let withCarol = try await view(alicesPhone, of: "carol", version: 2)
            #expect(withCarol["status"]?.stringValue == "active")
            #expect(withCarol["unread"]?.int64Value == 1)

            // History from the database, through the request/response protocol.
            let history = try await dmHistory(alicesPhone, peer: "bob", requestId: "h1")
            #expect(history["error"] == nil, "\(history.text)")
            #expect(historyMessages(history) == continued)
            #expect(history["hasMore"]?.boolValue == false)
            let older = try await dmHistory(alicesPhone, peer: "bob", requestId: "h2", before: t0 + 4)
            #expect(historyMessages(older) == Array(chat.prefix(2)))

            for peer in [alice, bob, carol, alicesPhone] { await peer.close() }
            await coordinator.stop()
        }
    }

    // MARK: 6. carol cannot read alice's conversation with bob

    @Test func carolCannotReadOrWriteAlicesConversations() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--conversation-snapshot-seconds", "1"])
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            let carol = try await TestPeer.connect(broker: broker, user: "carol")
            let t0 = nowMillis() - 60_000

            // A conversation exists before carol looks: its snapshots are retained.
            try await alice.dm(.dm("a-req", "request", peer: "bob", at: t0 + 1, text: "secret"))
            try expectReceipt(try await alice.receipt("a-req"), "accepted", version: 1)
            try await view(alice, of: "bob", version: 1)

            // The broker grants the subscriptions (the SUBACK does not throw) ...
            let prying = [
                "\(topics.root)/users/alice/dm/conversations/#",
                "\(topics.root)/users/alice/receipts",
            ]
            // Her own receipts on the same subscription prove the listener hears what she may read.
            let control = topics.receipts(user: "carol")
            let subscription = try await carol.client.subscribe(prying + [control])
            let overheard = LockedBox<[MQTTMessage]>([])
            let listener = Task {
                do {
                    for try await message in subscription { overheard.update { $0.append(message) } }
                } catch {}
            }

            // ... but delivers nothing while alice's traffic flows.
            try await bob.dm(.dm("b-acc", "accept", peer: "alice", at: t0 + 2))
            try expectReceipt(try await bob.receipt("b-acc"), "accepted", version: 2)
            for i in 1...5 {
                try await alice.dm(.dm("a-m\(i)", "message", peer: "bob", at: t0 + 2 + Int64(i), text: "secret \(i)"))
                try expectReceipt(try await alice.receipt("a-m\(i)"), "accepted", version: 2 + Int64(i))
            }
            try await view(alice, of: "bob", version: 7)
            try await view(bob, of: "alice", version: 7)
            try await carol.dm(.dm("c-probe", "read", peer: "alice", at: t0 + 8))
            try expectReceipt(try await carol.receipt("c-probe"), "rejected", code: "not_found", version: nil)
            try await Task.sleep(for: .seconds(3))
            #expect(overheard.get().contains { $0.topic == control }, "the control subscription heard nothing")
            #expect(overheard.get().filter { $0.topic != control }.isEmpty, "carol overheard: \(overheard.get().map(\.topic))")
            let aliceTopics = carol.all(on: topics.receipts(user: "alice")) + carol.all(on: topics.conversation(user: "alice", peer: "bob"))
            #expect(aliceTopics.isEmpty)

            // carol cannot send commands as alice: the broker refuses the publish (0x87) ...
            let forged = JSON.dm("forged", "request", peer: "carol", at: t0 + 10, text: "hi, it's me, alice")
            do {
                try await carol.publish(topics.dmCommands(user: "alice"), forged)
                Issue.record("the broker accepted carol's publish on alice's command topic")
            } catch let error as MQTTError {
                #expect(error.kind == .refused(reason: 0x87), "\(error)")
            }
            // ... and nothing happens in alice's name.
            try await alice.dm(.dm("a-probe", "read", peer: "bob", at: t0 + 11))
            try await alice.receipt("a-probe")
            #expect(alice.receipts(id: "forged").isEmpty)
            #expect(carol.all(on: topics.conversation(user: "carol", peer: "alice")).isEmpty)
            #expect(alice.all(on: topics.conversation(user: "alice", peer: "carol")).isEmpty)
            #expect(overheard.get().filter { $0.topic != control }.isEmpty)

            listener.cancel()
            for peer in [alice, bob, carol] { await peer.close() }
            await coordinator.stop()
        }
    }

    // MARK: 7. Rejections and their codes

    @Test func rejectionsCarryTheirCodes() async throws {
        try await withChat { broker, coordinator, alice, bob in
            let t0 = nowMillis() - 60_000

            // Talking to oneself.
            try await alice.dm(.dm("self", "request", peer: "alice", at: t0 + 1, text: "me"))
            try expectReceipt(try await alice.receipt("self"), "rejected", code: "self_conversation", version: nil)
            #expect(alice.all(on: topics.conversation(user: "alice", peer: "alice")).isEmpty)

            // Answers to a request nobody made; reading or leaving a conversation that does not exist.
            try await alice.dm(.dm("acc0", "accept", peer: "bob", at: t0 + 2))
            try expectReceipt(try await alice.receipt("acc0"), "rejected", code: "no_pending_request", version: nil)
            try await alice.dm(.dm("dec0", "decline", peer: "bob", at: t0 + 3))
            try expectReceipt(try await alice.receipt("dec0"), "rejected", code: "no_pending_request", version: nil)
            try await alice.dm(.dm("read0", "read", peer: "carol", at: t0 + 4))
            try expectReceipt(try await alice.receipt("read0"), "rejected", code: "not_found", version: nil)
            try await alice.dm(.dm("leave0", "leave", peer: "carol", at: t0 + 5))
            try expectReceipt(try await alice.receipt("leave0"), "rejected", code: "not_active", version: nil)

            // Asking twice; the asker cannot accept her own request.
            try await alice.dm(.dm("req1", "request", peer: "bob", at: t0 + 6))
            try expectReceipt(try await alice.receipt("req1"), "accepted", version: 1)
            try await alice.dm(.dm("req2", "request", peer: "bob", at: t0 + 7, text: "hello??"))
            try expectReceipt(try await alice.receipt("req2"), "rejected", code: "already_requested", version: 1)
            try await alice.dm(.dm("acc1", "accept", peer: "bob", at: t0 + 8))
            try expectReceipt(try await alice.receipt("acc1"), "rejected", code: "no_pending_request", version: 1)

            // Asking an active conversation, from either side.
            try await bob.dm(.dm("b-acc", "accept", peer: "alice", at: t0 + 9))
            try expectReceipt(try await bob.receipt("b-acc"), "accepted", version: 2)
            try await alice.dm(.dm("req3", "request", peer: "bob", at: t0 + 10))
            try expectReceipt(try await alice.receipt("req3"), "rejected", code: "already_active", version: 2)
            try await bob.dm(.dm("b-req", "request", peer: "alice", at: t0 + 11))
            try expectReceipt(try await bob.receipt("b-req"), "rejected", code: "already_active", version: 2)

            // DM text: 4096 bytes is the limit, counted in UTF-8 bytes, not characters.
            try await alice.dm(.dm("max", "message", peer: "bob", at: t0 + 12, text: String(repeating: "a", count: 4096)))
            try expectReceipt(try await alice.receipt("max"), "accepted", version: 3)
            try await alice.dm(.dm("long", "message", peer: "bob", at: t0 + 13, text: String(repeating: "a", count: 4097)))
            try expectReceipt(try await alice.receipt("long"), "rejected", code: "invalid_payload", version: nil, anyVersion: true)
            try await alice.dm(.dm("wide", "message", peer: "bob", at: t0 + 14, text: String(repeating: "é", count: 2049)))
            try expectReceipt(try await alice.receipt("wide"), "rejected", code: "invalid_payload", version: nil, anyVersion: true)

            // The same commandId again: duplicate, code null, the current version; every
            // further copy gets its own duplicate receipt.
            try await alice.dm(.dm("hello", "message", peer: "bob", at: t0 + 15, text: "hello"))
            try expectReceipt(try await alice.receipt("hello"), "accepted", version: 4)
            try await alice.dm(.dm("hello", "message", peer: "bob", at: t0 + 15, text: "hello"))
            try expectReceipt(try await alice.receipt("hello", count: 2), "duplicate", version: 4)
            try await alice.dm(.dm("hello", "message", peer: "bob", at: t0 + 16, text: "hello again"))
            try expectReceipt(try await alice.receipt("hello", count: 3), "duplicate", version: 4)

            // None of the rejected or duplicate commands reached the conversation.
            try await bob.dm(.dm("b-probe", "read", peer: "alice", at: t0 + 17))
            try expectReceipt(try await bob.receipt("b-probe"), "accepted", version: 5)
            let b = try await view(bob, of: "alice", version: 5)
            #expect(messages(b).map(\.id) == ["max", "hello"])
            #expect(b["status"]?.stringValue == "active")
        }
    }

    // MARK: 8. History beyond the snapshot

    @Test func historyPagesOlderMessagesThanTheSnapshot() async throws {
        try await withChat { broker, coordinator, alice, bob in
            let t0 = nowMillis() - 600_000

            try await alice.dm(.dm("req", "request", peer: "bob", at: t0))
            try expectReceipt(try await alice.receipt("req"), "accepted", version: 1)
            try await bob.dm(.dm("acc", "accept", peer: "alice", at: t0 + 1))
            try expectReceipt(try await bob.receipt("acc"), "accepted", version: 2)

            let count = 230
            func id(_ i: Int) -> String { "m" + String(format: "%03d", i) }
            func sentAt(_ i: Int) -> Int64 { t0 + 1_000 + Int64(i) * 10 }
            let all = (1...count).map { Msg(id($0), "alice", "message \($0)", sentAt($0), read: false) }
            for m in all {
                try await alice.dm(.dm(m.id, "message", peer: "bob", at: m.sentAt, text: m.text))
            }
            try expectReceipt(try await alice.receipt(id(count), timeout: .seconds(30)), "accepted", version: 2 + Int64(count))
            #expect(alice.receipts.filter { $0["status"]?.stringValue == "accepted" }.count == count + 1)

            // The snapshot: the latest 20, oldest first; unread counts them all.
            let snapshot = try await view(bob, of: "alice", version: 2 + Int64(count), timeout: .seconds(20))
            let window = messages(snapshot)
            #expect(window == Array(all.suffix(Conversation.snapshotSize)))
            #expect(snapshot["unread"]?.int64Value == Int64(count))
            let oldest = try #require(window.first)
            let older = Array(all.dropLast(Conversation.snapshotSize))  // 210

            // The newest 200 older ones in one page (the most a page holds), and more before.
            let page = try await dmHistory(bob, peer: "alice", requestId: "older", before: oldest.sentAt, limit: 200)
            #expect(page["error"] == nil, "\(page.text)")
            #expect(page["peer"]?.stringValue == "alice")
            #expect(historyMessages(page) == Array(older.suffix(200)))
            #expect(page["hasMore"]?.boolValue == true)

            // Page by page, each page oldest first, walking back with `before`, to the first.
            var walked: [Msg] = []
            var before = oldest.sentAt
            var pages = 0
            while true {
                let next = try await dmHistory(bob, peer: "alice", requestId: "p\(pages)", before: before, limit: 50)
                walked = historyMessages(next) + walked
                pages += 1
                guard next["hasMore"]?.boolValue == true, let first = historyMessages(next).first else { break }
                before = first.sentAt
            }
            #expect(pages == 5)
            #expect(walked == older)

            // alice sees the same history from her side.
            let alicesPage = try await dmHistory(alice, peer: "bob", requestId: "a1", before: older[30].sentAt, limit: 50)
            #expect(historyMessages(alicesPage) == Array(all.prefix(30)))
        }
    }

    /// Reading marks every message from the peer as read (CONTRACT "read"), not only the
    /// 20 the snapshot holds; and a conversation longer than the snapshot survives a restart.
    @Test func aReadMarksOlderHistoryReadToo() async throws {
        try await withChat { broker, coordinator, alice, bob in
            let t0 = nowMillis() - 600_000

            try await alice.dm(.dm("req", "request", peer: "bob", at: t0))
            try await bob.dm(.dm("acc", "accept", peer: "alice", at: t0 + 1))
            try expectReceipt(try await bob.receipt("acc"), "accepted", version: 2)
            let count = 230
            let all = (1...count).map { Msg("m\($0)", "alice", "message \($0)", t0 + 1_000 + Int64($0) * 10, read: false) }
            for m in all {
                try await alice.dm(.dm(m.id, "message", peer: "bob", at: m.sentAt, text: m.text))
            }
            try expectReceipt(try await alice.receipt("m\(count)", timeout: .seconds(30)), "accepted", version: 232)

            // Longer than the snapshot, across a restart: the window and the unread count.
            #expect(await coordinator.stop() == 0)
            try await coordinator.start()
            try await bob.dm(.dm("read", "read", peer: "alice", at: t0 + 10_000))
            try expectReceipt(try await bob.receipt("read"), "accepted", version: 233)
            let snapshot = try await view(bob, of: "alice", version: 233, timeout: .seconds(20))
            #expect(messages(snapshot) == all.suffix(Conversation.snapshotSize).map { $0.read() })
            #expect(snapshot["unread"]?.int64Value == 0)

            let older = try await dmHistory(bob, peer: "alice", requestId: "older", before: all[30].sentAt, limit: 50)
            #expect(historyMessages(older).map(\.id) == all.prefix(30).map(\.id))
            #expect(historyMessages(older) == all.prefix(30).map { $0.read() })
        }
    }

    // MARK: ConversationChanges

    /// A chain of ConversationChanges, applied by a ConversationReplica from the first
    /// snapshot on, ends where the (paced) snapshot does; every receipt's version has
    /// its changes out before it.
    @Test func aChainOfChangesFollowsTheConversation() async throws {
        try await withChat { _, _, alice, bob in
            let t0 = nowMillis() - 60_000
            try await alice.dm(.dm("a-req", "request", peer: "bob", at: t0 + 1, text: "hi bob"))
            try await alice.receipt("a-req")
            let first = try ConversationSnapshot(json: try await view(bob, of: "alice", version: 1))
            var replica = ConversationReplica(snapshot: first)
            try await bob.dm(.dm("b-acc", "accept", peer: "alice", at: t0 + 2))
            try await bob.receipt("b-acc")
            for i in 0..<8 {
                let sender = i % 2 == 0 ? alice : bob
                let id = "m\(i)"
                try await sender.dm(.dm(id, "message", peer: sender === alice ? "bob" : "alice", at: t0 + 3 + Int64(i), text: "text \(i)"))
                let receipt = try await sender.receipt(id)
                // The receipt comes after the changes that carry its version.
                let version = try #require(receipt["version"]?.int64Value)
                try await bob.waitFor(topics.conversationChanges(user: "bob", peer: "alice")) { ($0["toVersion"]?.int64Value ?? 0) >= version }
            }
            try await bob.dm(.dm("b-read", "read", peer: "alice", at: t0 + 20))
            let last = try #require(try await bob.receipt("b-read")["version"]?.int64Value)
            try await bob.waitFor(topics.conversationChanges(user: "bob", peer: "alice")) { ($0["toVersion"]?.int64Value ?? 0) >= last }
            for json in bob.all(on: topics.conversationChanges(user: "bob", peer: "alice")) {
                let changes = try ConversationChanges(json: json)
                let outcome = replica.apply(changes)
                // The request's changes are already in the first snapshot.
                #expect(outcome == (changes.toVersion <= first.version ? .ignored : .applied), "changes \(changes.fromVersion)-\(changes.toVersion) on \(replica.version)")
            }
            #expect(replica.version == last)
            // The snapshot follows within the pacing interval (10 s) of the last change.
            let truth = try ConversationSnapshot(json: try await view(bob, of: "alice", version: last, timeout: .seconds(20)))
            #expect(replica.messages == truth.messages)
            #expect(replica.status == truth.status && replica.unread == truth.unread)
        }
    }

    // MARK: Helpers

    /// `peer`'s retained view of the conversation with `other`, once at `version` or later.
    @discardableResult
    func view(_ peer: TestPeer, of other: String, version: Int64, timeout: Duration = .seconds(10)) async throws -> JSON {
        try await peer.waitFor(topics.conversation(user: peer.user, peer: other), timeout: timeout) {
            ($0["version"]?.int64Value ?? 0) >= version
        }
    }

    /// Asks for DM history on `users/{user}/requests` and waits for the answer.
    func dmHistory(_ peer: TestPeer, peer other: String, requestId: String, before: Int64? = nil, limit: Int? = nil) async throws -> JSON {
        var members: [JSON.Member] = [.init("requestId", .string(requestId)), .init("type", "dmHistory"), .init("peer", .string(other))]
        if let before { members.append(.init("before", .int(before))) }
        if let limit { members.append(.init("limit", .int(Int64(limit)))) }
        try await peer.publish(topics.requests(user: peer.user), .object(members))
        return try await peer.waitFor(topics.responses(user: peer.user), timeout: .seconds(15)) {
            $0["requestId"]?.stringValue == requestId
        }
    }

    func expectReceipt(
        _ receipt: JSON, _ status: String, code: String? = nil, version: Int64?, anyVersion: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(receipt["kind"]?.stringValue == "dm", "\(receipt.text)", sourceLocation: sourceLocation)
        #expect(receipt["status"]?.stringValue == status, "\(receipt.text)", sourceLocation: sourceLocation)
        #expect(receipt["code"] == JSON(code), "\(receipt.text)", sourceLocation: sourceLocation)
        if !anyVersion {
            #expect(receipt["version"] == JSON(version), "\(receipt.text)", sourceLocation: sourceLocation)
        }
        #expect(receipt["message"]?.stringValue != nil, "\(receipt.text)", sourceLocation: sourceLocation)
    }
}

/// A message as a ConversationSnapshot or a history page carries it.
struct Msg: Hashable, CustomStringConvertible {
    var id: String
    var sender: String
    var text: String
    var sentAt: Int64
    var isRead: Bool

    init(_ id: String, _ sender: String, _ text: String, _ sentAt: Int64, read: Bool) {
        self.id = id
        self.sender = sender
        self.text = text
        self.sentAt = sentAt
        self.isRead = read
    }

    init?(_ json: JSON) {
        guard let id = json["id"]?.stringValue, let sender = json["sender"]?.stringValue,
              let text = json["text"]?.stringValue, let sentAt = json["sentAt"]?.int64Value,
              let isRead = json["isRead"]?.boolValue else { return nil }
        self.init(id, sender, text, sentAt, read: isRead)
    }

    func read() -> Msg {
        var copy = self
        copy.isRead = true
        return copy
    }

    var description: String { "\(id)/\(sender)/\(sentAt)\(isRead ? "/read" : "")" }
}

/// The messages of a snapshot; a malformed one shows up as a mismatch.
func messages(_ snapshot: JSON) -> [Msg] {
    guard case .array(let items)? = snapshot["messages"] else { return [] }
    return items.map { Msg($0) ?? Msg("malformed: \($0.text)", "", "", 0, read: false) }
}

func historyMessages(_ response: JSON) -> [Msg] { messages(response) }

extension JSON {
    /// A DMCommand payload.
    static func dm(_ id: String, _ type: String, peer: String, at timestamp: Int64 = nowMillis(), text: String? = nil) -> JSON {
        var members: [JSON.Member] = [
            .init("commandId", .string(id)), .init("type", .string(type)), .init("peer", .string(peer)),
            .init("timestamp", .int(timestamp)),
        ]
        if let text { members.append(.init("text", .string(text))) }
        return .object(members)
    }
}

/// A broker with the shipped config, the coordinator, and alice and bob connected; all
/// closed after `body`. These tests are about the state machine and wait for the
/// snapshots of each step: the coordinator paces them to 1 s (`--conversation-snapshot-
/// seconds 1`) rather than the default 10 s. DMPaceTests runs the default.
func withChat(_ body: (MosquittoBroker, CoordinatorProcess, TestPeer, TestPeer) async throws -> Void) async throws {
    try await withBroker(.shipped) { broker in
        let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--conversation-snapshot-seconds", "1"])
        let alice = try await TestPeer.connect(broker: broker, user: "alice")
        let bob = try await TestPeer.connect(broker: broker, user: "bob")
        try await body(broker, coordinator, alice, bob)
        await alice.close()
        await bob.close()
        await coordinator.stop()
    }
}
