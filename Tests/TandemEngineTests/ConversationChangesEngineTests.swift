import Testing
import TandemCore
@testable import TandemEngine

/// ConversationChanges from the engine: one per view per batch before any snapshot, and
/// snapshots paced to once every 10 s unless a status changes; `dmChanges` answered from
/// the changes held since the last snapshot.
@Suite struct ConversationChangesEngineTests {
    static let t0: Millis = 1_800_000_000_000
    static let root = "tandem/v1/users"

    func engine() -> Engine {
        var c = EngineConfiguration()
        c.rateLimitPerSecond = 0
        return Engine(configuration: c, epoch: "e0", now: Self.t0)
    }

    func command(_ id: String, _ type: DMCommand.Kind, peer: String, text: String? = nil, at t: Millis) -> [UInt8] {
        DMCommand(commandId: id, type: type, peer: peer, timestamp: t, text: text).json.serialized()
    }

    /// Sends `type` from `user` at `t` and steps past the window; returns the step.
    func send(_ e: inout Engine, _ user: String, _ id: String, _ type: DMCommand.Kind, peer: String, text: String? = nil, at t: Millis) -> Engine.Step {
        _ = e.ingest(topic: "\(Self.root)/\(user)/dm/commands", payload: command(id, type, peer: peer, text: text, at: t), now: t)
        return e.step(now: t + 30)
    }

    func topics(_ step: Engine.Step) -> [String] { step.publications.map(\.topic) }

    func changes(_ step: Engine.Step, user: String, peer: String) throws -> ConversationChanges? {
        guard let p = step.publications.first(where: { $0.topic == "\(Self.root)/\(user)/dm/conversations/\(peer)/changes" }) else { return nil }
        return try ConversationChanges.decode(p.payload)
    }

    @Test func changesGoOutBeforeSnapshotsAndReceiptsLast() throws {
        var e = engine()
        let step = send(&e, "alice", "c1", .request, peer: "bob", text: "hi", at: Self.t0)
        #expect(topics(step) == [
            "\(Self.root)/alice/dm/conversations/bob/changes", "\(Self.root)/bob/dm/conversations/alice/changes",
            "\(Self.root)/alice/dm/conversations/bob", "\(Self.root)/bob/dm/conversations/alice",
            "\(Self.root)/alice/receipts",
        ])
        let bob = try #require(try changes(step, user: "bob", peer: "alice"))
        #expect(bob.fromVersion == 0 && bob.toVersion == 1 && bob.status == .received && bob.unread == 1)
        #expect(bob.changes.map(\.commandId) == ["c1"])
        #expect(bob.changes.first?.messages.map(\.text) == ["hi"])
        let alice = try #require(try changes(step, user: "alice", peer: "bob"))
        #expect(alice.status == .pending && alice.unread == 0)
    }

    @Test func messagesArePacedToOneSnapshotInTenSecondsStatusChangesAreNot() throws {
        var e = engine()
        _ = send(&e, "alice", "c1", .request, peer: "bob", at: Self.t0)
        // Accept: a status change, snapshots at once even within the second.
        let accept = send(&e, "bob", "c2", .accept, peer: "alice", at: Self.t0 + 100)
        #expect(topics(accept).contains("\(Self.root)/alice/dm/conversations/bob"))
        // A message within the interval: changes only; the snapshot is due 10 s after the last.
        let m1 = send(&e, "alice", "c3", .message, peer: "bob", text: "one", at: Self.t0 + 200)
        #expect(!topics(m1).contains("\(Self.root)/bob/dm/conversations/alice"))
        #expect(try changes(m1, user: "bob", peer: "alice")?.fromVersion == 2)
        let m2 = send(&e, "alice", "c4", .message, peer: "bob", text: "two", at: Self.t0 + 300)
        #expect(try changes(m2, user: "bob", peer: "alice")?.toVersion == 4)
        #expect(!topics(m2).contains("\(Self.root)/bob/dm/conversations/alice"))
        #expect(e.nextDeadline == Self.t0 + 130 + 10_000)
        #expect(!topics(e.step(now: Self.t0 + 9_000)).contains("\(Self.root)/bob/dm/conversations/alice"))
        let paced = e.step(now: Self.t0 + 10_130)
        let snapshot = try #require(paced.publications.first { $0.topic == "\(Self.root)/bob/dm/conversations/alice" })
        let view = try ConversationSnapshot.decode(snapshot.payload)
        #expect(view.version == 4 && view.messages.map(\.text) == ["one", "two"] && view.unread == 2)
        #expect(e.nextDeadline == nil)
        // A read: the copies now read, to both views.
        let read = send(&e, "bob", "c5", .read, peer: "alice", at: Self.t0 + 10_200)
        let toAlice = try #require(try changes(read, user: "alice", peer: "bob"))
        #expect(toAlice.changes.first?.type == .read)
        #expect(toAlice.changes.first?.messages.map(\.isRead) == [true, true])
        // Leave: a status change, at once.
        let leave = send(&e, "bob", "c6", .leave, peer: "alice", at: Self.t0 + 10_300)
        #expect(topics(leave).contains("\(Self.root)/alice/dm/conversations/bob"))
    }

    @Test func aReplicaFollowsTheEngineThroughAChain() throws {
        var e = engine()
        var steps: [Engine.Step] = []
        steps.append(send(&e, "alice", "c1", .request, peer: "bob", text: "hi", at: Self.t0))
        var bob = ConversationReplica(user: "bob", peer: "alice")
        let firstSnapshot = try #require(steps[0].publications.first { $0.topic == "\(Self.root)/bob/dm/conversations/alice" })
        bob.snapshot(try ConversationSnapshot.decode(firstSnapshot.payload))
        steps = [
            send(&e, "bob", "c2", .accept, peer: "alice", at: Self.t0 + 10),
            send(&e, "alice", "c3", .message, peer: "bob", text: "a", at: Self.t0 + 50),
            send(&e, "alice", "c4", .message, peer: "bob", text: "b", at: Self.t0 + 90),
            send(&e, "bob", "c5", .read, peer: "alice", at: Self.t0 + 130),
            send(&e, "bob", "c6", .message, peer: "alice", text: "c", at: Self.t0 + 170),
        ]
        for step in steps {
            let c = try #require(try changes(step, user: "bob", peer: "alice"))
            do { let outcome = bob.apply(c); #expect(outcome == .applied) }
        }
        let flushed = e.step(now: Self.t0 + 15_000)
        let last = try #require(flushed.publications.last { $0.topic == "\(Self.root)/bob/dm/conversations/alice" })
        let truth = try ConversationSnapshot.decode(last.payload)
        #expect(bob.version == truth.version)
        #expect(bob.messages == truth.messages)
        #expect(bob.status == truth.status && bob.unread == truth.unread)
    }

    // MARK: dmChanges

    func ask(_ e: inout Engine, _ user: String, _ request: ClientRequest, at t: Millis) throws -> JSON {
        let answers = e.ingest(topic: "\(Self.root)/\(user)/requests", payload: request.json.serialized(), now: t)
        #expect(e.takeQueries().isEmpty, "answered by the engine, not the store")
        let answer = try #require(answers.first { $0.topic == "\(Self.root)/\(user)/responses" })
        return try JSON.parse(answer.payload)
    }

    /// Between two snapshots, the changes since any version the last snapshot or a later
    /// change had: exactly those, as one ConversationChanges; older than the snapshot (or
    /// another epoch), the view whole.
    @Test func dmChangesAreAnsweredFromWhatCameSinceTheSnapshot() throws {
        var e = engine()
        _ = send(&e, "alice", "c1", .request, peer: "bob", text: "hi", at: Self.t0)
        _ = send(&e, "bob", "c2", .accept, peer: "alice", at: Self.t0 + 100)  // snapshot at version 2
        _ = send(&e, "alice", "c3", .message, peer: "bob", text: "one", at: Self.t0 + 200)
        _ = send(&e, "alice", "c4", .message, peer: "bob", text: "two", at: Self.t0 + 300)
        _ = send(&e, "bob", "c5", .read, peer: "alice", at: Self.t0 + 400)

        let all = try ask(&e, "bob", ClientRequest(requestId: "q1", kind: .dmChanges, peer: "alice", since: 2, epoch: "e0"), at: Self.t0 + 500)
        #expect(all["requestId"] == "q1" && all["type"] == "dmChanges")
        let changes = try ConversationChanges(json: all)
        #expect(changes.user == "bob" && changes.peer == "alice" && changes.epoch == "e0")
        #expect(changes.fromVersion == 2 && changes.toVersion == 5 && changes.status == .active && changes.unread == 0)
        #expect(changes.changes.map(\.commandId) == ["c3", "c4", "c5"])
        #expect(changes.changes.last?.messages.map(\.isRead) == [true, true, true])

        let some = try ConversationChanges(json: try ask(&e, "alice", ClientRequest(requestId: "q2", kind: .dmChanges, peer: "bob", since: 4), at: Self.t0 + 500))
        #expect(some.fromVersion == 4 && some.changes.map(\.commandId) == ["c5"])
        let none = try ConversationChanges(json: try ask(&e, "alice", ClientRequest(requestId: "q3", kind: .dmChanges, peer: "bob", since: 5), at: Self.t0 + 500))
        #expect(none.fromVersion == 5 && none.toVersion == 5 && none.changes.isEmpty)

        // Older than the last snapshot, another epoch, or ahead of the conversation: the view whole.
        for (since, epoch) in [(Int64(1), "e0"), (3, "an-old-epoch"), (9, "e0")] {
            let whole = try ask(&e, "bob", ClientRequest(requestId: "q4", kind: .dmChanges, peer: "alice", since: since, epoch: epoch), at: Self.t0 + 500)
            let snapshot = try ConversationSnapshot(json: try #require(whole["snapshot"]))
            #expect(snapshot.version == 5 && snapshot.user == "bob" && snapshot.unread == 0 && snapshot.messages.count == 3)
        }

        // Once the paced snapshot went out, the held changes are gone: since 2 is the view.
        _ = e.step(now: Self.t0 + 10_200)
        let after = try ask(&e, "bob", ClientRequest(requestId: "q5", kind: .dmChanges, peer: "alice", since: 2), at: Self.t0 + 10_300)
        #expect(after["snapshot"] != nil)
        #expect(e.conversationChangesSinceSnapshot.isEmpty)

        // No such conversation, or one with oneself: the history query's error shape.
        let missing = try ask(&e, "carol", ClientRequest(requestId: "q6", kind: .dmChanges, peer: "alice", since: 0), at: Self.t0 + 10_300)
        #expect(missing["error"]?["code"] == "not_found")
        let own = try ask(&e, "carol", ClientRequest(requestId: "q7", kind: .dmChanges, peer: "carol", since: 0), at: Self.t0 + 10_300)
        #expect(own["error"]?["code"] == "self_conversation")
    }

    /// A snapshot carries the latest 20 messages; the engine keeps 200 for read copies.
    @Test func aSnapshotCarriesTheLatestTwenty() throws {
        var e = engine()
        _ = send(&e, "alice", "c0", .request, peer: "bob", at: Self.t0)
        _ = send(&e, "bob", "a0", .accept, peer: "alice", at: Self.t0 + 10)
        for i in 1...30 { _ = send(&e, "alice", "m\(i)", .message, peer: "bob", text: "\(i)", at: Self.t0 + 100 + Millis(i)) }
        let flushed = e.step(now: Self.t0 + 20_000)
        let snapshot = try ConversationSnapshot.decode(try #require(flushed.publications.last { $0.topic == "\(Self.root)/bob/dm/conversations/alice" }).payload)
        #expect(snapshot.messages.map(\.text) == (11...30).map { "\($0)" })
        #expect(snapshot.unread == 30)
    }
}
