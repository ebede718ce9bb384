import Testing
import TandemClient
import TestSupport

/// Issue 23: conversations at a person's pace, with the coordinator's default pacing
/// (snapshots at most every 10 s while only messages and read marks change). A client
/// that missed changes fills the gap with one `dmChanges` request instead of waiting for
/// the next snapshot; a real broker and coordinator, clients from `TandemClient`.
@Suite struct DMPaceTests {
    let topics = Topics()

    func client(_ broker: MosquittoBroker, _ user: String, device: String) throws -> TandemClient {
        try TandemClient(host: broker.host, port: broker.port, username: user, password: "\(user)-demo", clientId: "\(user)-\(device)")
    }

    /// The shipped broker, a coordinator with the default pacing, alice's and bob's
    /// phones connected, and their conversation: alice asks ("hi"), bob accepts (version
    /// 2). Everything is closed after `body`.
    func withChat(_ body: (MosquittoBroker, TandemClient, TandemClient) async throws -> Void) async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try client(broker, "alice", device: "phone")
            let bob = try client(broker, "bob", device: "phone")
            try await alice.connect()
            try await bob.connect()
            #expect(try await alice.dm(.request, to: "bob", text: "hi").status == .accepted)
            #expect(try await bob.dm(.accept, to: "alice").status == .accepted)
            try await body(broker, alice, bob)
            for c in [alice, bob] { await c.close() }
            #expect(await coordinator.stop() == 0)
        }
    }

    /// A client that was away while messages came (an app opened again) shows them in one
    /// round trip: the retained snapshot first (it may be up to 10 s behind), then the
    /// answer to one `dmChanges` request, before the next paced snapshot is out.
    @Test(.timeLimit(.minutes(1)))
    func aClientBackFromAwayCatchesUpInOneRoundTrip() async throws {
        try await withChat { broker, alice, bobPhone in
            _ = try await first(try await bobPhone.conversation(with: "alice")) { $0.version >= 2 }
            await bobPhone.close()

            // While bob is away: three messages, well within one pacing interval, so the
            // retained snapshot stays at the accept's version.
            for text in ["one", "two", "three"] {
                #expect(try await alice.dm(.message, to: "bob", text: text).status == .accepted)
            }
            let watch = try await TestPeer.connect(broker: broker, user: "bob")
            let retained = try await watch.waitFor(topics.conversation(user: "bob", peer: "alice"))
            #expect(retained["version"]?.int64Value == 2, "the snapshot is paced: \(retained.text)")

            // bob opens the app again.
            let bobAgain = try client(broker, "bob", device: "phone")
            try await bobAgain.connect()
            let views = try await bobAgain.conversation(with: "alice")
            let caughtUp = try await first(views) { $0.version == 5 }
            #expect(caughtUp.messages.map(\.text) == ["hi", "one", "two", "three"])
            #expect(caughtUp.unread == 4 && caughtUp.status == .active)
            // One request, and the paced snapshot is still behind: the request filled it.
            // The watch hears the request on a connection of its own, which may come after
            // bob already has the answer (the coordinator answers within its turn).
            _ = try await watch.waitFor(topics.requests(user: "bob"), timeout: .seconds(5)) { $0["type"] == "dmChanges" }
            let asked = watch.all(on: topics.requests(user: "bob")).filter { $0["type"] == "dmChanges" }
            #expect(asked.count == 1, "\(asked.map(\.text))")
            #expect(asked.first?["since"]?.int64Value == 2)
            #expect((watch.latest(on: topics.conversation(user: "bob", peer: "alice"))?["version"]?.int64Value ?? 0) < 5)

            // The paced snapshot follows within 10 s and agrees with what bob holds.
            let paced = try ConversationSnapshot(json: try await watch.waitFor(topics.conversation(user: "bob", peer: "alice"), timeout: .seconds(20)) {
                $0["version"]?.int64Value == 5
            })
            #expect(caughtUp.messages.suffix(paced.messages.count) == paced.messages[...])
            #expect(caughtUp.unread == paced.unread && caughtUp.status == paced.status)
            await bobAgain.close()
            await watch.close()
        }
    }

    /// A subscriber that comes late to a live chat (bob's second device): the retained
    /// snapshot, then the gap to the live changes filled, and a read mark made on the
    /// other device during the gap shows as read.
    @Test(.timeLimit(.minutes(1)))
    func aLateSubscriberGetsTheSnapshotThenTheGapWithAReadMark() async throws {
        try await withChat { broker, alice, bobPhone in
            #expect(try await alice.dm(.message, to: "bob", text: "one").status == .accepted)
            #expect(try await alice.dm(.message, to: "bob", text: "two").status == .accepted)
            // bob reads on his phone, during the interval the snapshot waits for.
            #expect(try await bobPhone.dm(.read, to: "alice").status == .accepted)

            let laptop = try client(broker, "bob", device: "laptop")
            try await laptop.connect()
            let views = try await laptop.conversation(with: "alice")
            var seen: [ConversationReplica] = []
            for await view in views {
                seen.append(view)
                if view.version >= 5 { break }
            }
            // First what the retained snapshot said, then the conversation as it is.
            #expect(seen.first?.version == 2, "\(seen.map(\.version))")
            let now = try #require(seen.last)
            #expect(now.version == 5)
            #expect(now.messages.map(\.text) == ["hi", "one", "two"])
            #expect(now.messages.allSatisfy(\.isRead) && now.unread == 0)

            // A message after it: the live changes apply on top, no second request.
            #expect(try await alice.dm(.message, to: "bob", text: "three").status == .accepted)
            let live = try await first(try await laptop.conversation(with: "alice")) { $0.version == 6 }
            #expect(live.messages.last?.text == "three" && live.unread == 1)
            await laptop.close()
        }
    }

    /// The request's own answers, as a client without the library sees them: changes
    /// since a version, or the view whole when that version is older than the snapshot;
    /// refusals in the history query's error shape.
    @Test(.timeLimit(.minutes(1)))
    func dmChangesAnswersOnTheWire() async throws {
        try await withChat { broker, alice, _ in
            #expect(try await alice.dm(.message, to: "bob", text: "one").status == .accepted)
            let peer = try await TestPeer.connect(broker: broker, user: "bob")
            func ask(_ id: String, _ fields: [JSON.Member]) async throws -> JSON {
                try await peer.publish(topics.requests(user: "bob"), .object([.init("requestId", .string(id)), .init("type", "dmChanges")] + fields))
                return try await peer.waitFor(topics.responses(user: "bob"), timeout: .seconds(15)) { $0["requestId"]?.stringValue == id }
            }
            let changes = try ConversationChanges(json: try await ask("q1", [.init("peer", "alice"), .init("since", 2)]))
            #expect(changes.fromVersion == 2 && changes.toVersion == 3 && changes.changes.map(\.type) == [.message])
            let whole = try await ask("q2", [.init("peer", "alice"), .init("since", 1)])
            #expect(try ConversationSnapshot(json: try #require(whole["snapshot"])).version == 3)
            #expect(try await ask("q3", [.init("peer", "carol"), .init("since", 0)])["error"]?["code"] == "not_found")
            #expect(try await ask("q4", [.init("peer", "alice")])["error"]?["code"] == "invalid_payload")
            #expect(try await ask("q5", [.init("peer", "alice"), .init("since", -1)])["error"]?["code"] == "invalid_payload")
            await peer.close()
        }
    }
}
