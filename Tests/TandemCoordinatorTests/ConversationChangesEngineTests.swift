import Testing
import TandemCore
@testable import TandemCoordinator

/// ConversationChanges from the engine: one per view per batch before any snapshot, and
/// snapshots paced to once a second unless a status changes.
@Suite struct ConversationChangesEngineTests {
    static let t0: Millis = 1_800_000_000_000
    static let root = "tandem/v1/users"

    func engine() -> Engine {
        var c = CoordinatorConfiguration()
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

    @Test func messagesArePacedToOneSnapshotASecondStatusChangesAreNot() throws {
        var e = engine()
        _ = send(&e, "alice", "c1", .request, peer: "bob", at: Self.t0)
        // Accept: a status change, snapshots at once even within the second.
        let accept = send(&e, "bob", "c2", .accept, peer: "alice", at: Self.t0 + 100)
        #expect(topics(accept).contains("\(Self.root)/alice/dm/conversations/bob"))
        // A message within the second: changes only; the snapshot is due a second after the last.
        let m1 = send(&e, "alice", "c3", .message, peer: "bob", text: "one", at: Self.t0 + 200)
        #expect(!topics(m1).contains("\(Self.root)/bob/dm/conversations/alice"))
        #expect(try changes(m1, user: "bob", peer: "alice")?.fromVersion == 2)
        let m2 = send(&e, "alice", "c4", .message, peer: "bob", text: "two", at: Self.t0 + 300)
        #expect(try changes(m2, user: "bob", peer: "alice")?.toVersion == 4)
        #expect(!topics(m2).contains("\(Self.root)/bob/dm/conversations/alice"))
        #expect(e.nextDeadline == Self.t0 + 130 + 1_000)
        let paced = e.step(now: Self.t0 + 1_130)
        let snapshot = try #require(paced.publications.first { $0.topic == "\(Self.root)/bob/dm/conversations/alice" })
        let view = try ConversationSnapshot.decode(snapshot.payload)
        #expect(view.version == 4 && view.messages.map(\.text) == ["one", "two"] && view.unread == 2)
        #expect(e.nextDeadline == nil)
        // A read: the copies now read, to both views.
        let read = send(&e, "bob", "c5", .read, peer: "alice", at: Self.t0 + 1_200)
        let toAlice = try #require(try changes(read, user: "alice", peer: "bob"))
        #expect(toAlice.changes.first?.type == .read)
        #expect(toAlice.changes.first?.messages.map(\.isRead) == [true, true])
        // Leave: a status change, at once.
        let leave = send(&e, "bob", "c6", .leave, peer: "alice", at: Self.t0 + 1_300)
        #expect(topics(leave).contains("\(Self.root)/alice/dm/conversations/bob"))
    }

    @Test func aReplicaFollowsTheEngineThroughAChain() throws {
        var e = engine()
        var steps: [Engine.Step] = []
        steps.append(send(&e, "alice", "c1", .request, peer: "bob", text: "hi", at: Self.t0))
        var bob = ConversationReplica(user: "bob", peer: "alice")
        let firstSnapshot = try #require(steps[0].publications.first { $0.topic == "\(Self.root)/bob/dm/conversations/alice" })
        bob.take(try ConversationSnapshot.decode(firstSnapshot.payload))
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
        let flushed = e.step(now: Self.t0 + 5_000)
        let last = try #require(flushed.publications.last { $0.topic == "\(Self.root)/bob/dm/conversations/alice" })
        let truth = try ConversationSnapshot.decode(last.payload)
        #expect(bob.version == truth.version)
        #expect(bob.messages == truth.messages)
        #expect(bob.status == truth.status && bob.unread == truth.unread)
    }
}
