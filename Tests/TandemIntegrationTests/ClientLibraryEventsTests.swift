import Testing
import TandemClient
import TandemCore
import TestSupport

/// What `tandem-agent` takes from the library beside the replicas: why a connect
/// failed, receipts on a stream, the cause of each room update (a rejection's rollback,
/// a lock that expired), every conversation at once, the queries, the coordinator's
/// status. Against the real broker and coordinator.
extension ClientLibraryTests {
    @Test(.timeLimit(.minutes(1)))
    func aBrokerNotReachedInTimeIsAnErrorThatSaysWhy() async throws {
        let nobody = try RefusingTCPPort()
        defer { withExtendedLifetime(nobody) {} }
        let port = nobody.port
        let transport = try MosquittoTransport(host: "127.0.0.1", port: port, user: "alice", clientId: "alice-nowhere")
        let alice = TandemClient(transport: transport, user: "alice", clientId: "alice-nowhere")
        do {
            try await alice.connect(timeout: .seconds(1))
            Issue.record("connected to a port nobody listens on")
        } catch TandemClientError.unreachable(let problem, let timeout) {
            #expect(problem?.contains("Connection refused") == true, "\(problem ?? "nil")")
            #expect(timeout == .seconds(1))
        }
        await alice.close()
    }

    @Test func roomUpdatesSayWhatCausedThem() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--lock-lease-seconds", "1"])
            let alice = try client(broker, "alice", device: "phone")
            let bob = try client(broker, "bob", device: "phone")
            let updates = try await alice.roomUpdates("why")
            let statuses = try await alice.coordinatorStatus()
            let receipts = await alice.receipts()
            try await alice.connect(timeout: .seconds(10))
            try await bob.connect(timeout: .seconds(10))
            _ = try await first(statuses) { $0.online }

            // Posted: shown at once, its receipt on the stream, with what was sent.
            let frame = Frame(x: 1, y: 2, width: 3, height: 4)
            let create = EditEvent(eventId: await alice.nextId(), type: .create, stickerId: "s1", timestamp: WallClock.now(),
                                   image: "a.png", frame: frame)
            let sent = await alice.post(create, in: "why", label: "create s1")
            let local = try await first(updates) {
                if case .localEdit(let event, nil) = $0.cause { return event.eventId == create.eventId }
                return false
            }
            #expect(local.replica.visibleSticker("s1")?.owner == "alice")
            let settled = try await first(receipts) { _ in true }
            #expect(settled == .settled(sent, Receipt.accepted(id: create.eventId, kind: .room, version: 1)))

            // Alice's lock runs out (a 1 s lease): the update says so.
            let expiry = try await first(updates) { !$0.expiredLocks.isEmpty }
            #expect(expiry.expiredLocks.map(\.stickerId) == ["s1"])
            #expect(expiry.replica.visibleSticker("s1")?.owner == nil)

            // A create of bob's id is rejected: the receipt comes with the room as it was.
            #expect(try await alice.invite("bob", to: "why").status == .accepted)
            #expect(try await bob.edit(.create, sticker: "s2", in: "why", image: "b.png", frame: frame).status == .accepted)
            _ = try await first(updates) { $0.replica.visibleSticker("s2") != nil && $0.replica.pendingEventIds.isEmpty }
            let clash = EditEvent(eventId: await alice.nextId(), type: .create, stickerId: "s2", timestamp: WallClock.now(),
                                  image: "mine.png", frame: Frame(x: 9, y: 9, width: 9, height: 9))
            let rejected = try await alice.send(clash, in: "why")
            #expect(rejected.status == .rejected && rejected.code == .alreadyExists, "\(rejected)")
            let rollback = try await first(updates) {
                if case .receipt(let receipt, let outgoing) = $0.cause { return receipt.id == clash.eventId && outgoing.label == "create s2" }
                return false
            }
            #expect(rollback.replica.visibleSticker("s2")?.image == "b.png")
            #expect(await alice.rejectedCount == 1)
            #expect(await alice.settle(timeout: .seconds(5)).isEmpty)

            // The coordinator leaves: its status says so.
            #expect(await coordinator.stop() == 0)
            _ = try await first(statuses) { !$0.online }
            await alice.close()
            await bob.close()
        }
    }

    @Test func everyConversationAndTheQueries() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try client(broker, "alice", device: "phone")
            let bob = try client(broker, "bob", device: "phone")
            let views = try await alice.conversations()
            try await alice.connect(timeout: .seconds(10))
            try await bob.connect(timeout: .seconds(10))

            #expect(try await alice.dm(.request, to: "bob", text: "hi").status == .accepted)
            #expect(try await bob.dm(.accept, to: "alice").status == .accepted)
            #expect(try await bob.dm(.message, to: "alice", text: "one").status == .accepted)
            #expect(try await alice.dm(.request, to: "carol").status == .accepted)
            let withBob = try await first(views) { $0.peer == "bob" && $0.messages.count == 2 }
            #expect(withBob.status == .active && withBob.unread == 1)
            _ = try await first(views) { $0.peer == "carol" && $0.status == .pending }
            #expect(await alice.conversationsCaughtUp(timeout: .seconds(3)))

            let page = try await alice.dmHistory(with: "bob", limit: 1)
            #expect(page.messages.map(\.text) == ["one"] && page.hasMore)
            let older = try await alice.dmHistory(with: "bob", before: try #require(page.messages.first).sentAt)
            #expect(older.messages.map(\.text) == ["hi"] && !older.hasMore)
            await #expect(throws: TandemClientError.queryRejected(code: "invalid_payload", message: "limit must be between 1 and 200")) {
                try await alice.dmHistory(with: "bob", limit: 500)
            }

            #expect(try await alice.logbook().isEmpty)
            #expect(try await alice.control(.start, workout: "w1", from: .watch).status == .accepted)
            #expect(try await alice.control(.stop, workout: "w1", from: .phone).status == .accepted)
            let logbook = try await alice.logbook()
            #expect(logbook.map(\.workoutId) == ["w1"] && logbook.first?.origin == "watch")

            await alice.close()
            await bob.close()
            #expect(await coordinator.stop() == 0)
        }
    }
}
