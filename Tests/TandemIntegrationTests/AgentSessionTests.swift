import Foundation
import Testing
import TandemCore
import TestSupport

/// Two people at two terminals: `tandem-agent room` and `tandem-agent dm` driven by
/// commands piped into stdin, as a script runs them. Each agent finishes its commands,
/// waits for their receipts and exits 0 when nothing was rejected, 1 otherwise.
@Suite(.serialized) struct AgentSessionTests {
    let topics = Topics()

    /// Alice creates a sticker and moves it; Bob tries to move it and is told it is
    /// Alice's. The presence grace is long so Alice's lock outlives her leaving.
    @Test func twoAgentRoomSession() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--presence-grace-seconds", "120"])
            let watcher = try await TestPeer.connect(broker: broker, user: "carol")
            let room = "party"

            let aliceInput = try Agent.inputFile(["create hat hat.png 10 10 120 80", "move hat 40 25", "invite bob", "invite carol viewer", "show"])
            defer { try? FileManager.default.removeItem(atPath: aliceInput) }
            let alice = try await Agent(broker: broker, user: "alice").run(["room", "--room", room], json: false, standardInput: aliceInput)
            #expect(alice.termination == .exited(0), "\(alice.transcript)")
            #expect(alice.standardOutput.contains("hat"), "\(alice.transcript)")
            #expect(!alice.standardOutput.contains("rejected"), "\(alice.transcript)")
            #expect(alice.standardOutput.contains("you are now the owner of room party"), "\(alice.transcript)")

            let state = try await watcher.roomState(room, version: 4)
            let hat = try #require(sticker("hat", in: state))
            #expect(hat["owner"]?.stringValue == "alice")
            #expect(hat["frame"]?["x"]?.doubleValue == 40 && hat["frame"]?["y"]?.doubleValue == 25)

            let bobInput = try Agent.inputFile(["move hat 300 300"])
            defer { try? FileManager.default.removeItem(atPath: bobInput) }
            let bob = try await Agent(broker: broker, user: "bob").run(["room", "--room", room], json: false, standardInput: bobInput)
            #expect(bob.termination == .exited(1), "a rejected edit: exit 1; \(bob.transcript)")
            #expect(bob.standardOutput.contains("rejected: move hat: owned_by_other"), "\(bob.transcript)")

            // Bob's table went back to the coordinator's state, which did not change.
            let after = try #require(watcher.latest(on: topics.roomState(room: room)))
            #expect(after["version"]?.int64Value == 4)
            #expect(sticker("hat", in: after) == hat)

            // The same with --json: the rejection is a receipt object.
            let bobAgain = try await Agent(broker: broker, user: "bob").run(["room", "--room", room], standardInput: bobInput)
            #expect(bobAgain.termination == .exited(1))
            let receipt = try #require(bobAgain.objects("receipt").first, "\(bobAgain.transcript)")
            #expect(receipt["status"]?.stringValue == "rejected")
            #expect(receipt["code"]?.stringValue == "owned_by_other")
            let last = try #require(bobAgain.objects("snapshot").last)
            #expect(last["version"]?.int64Value == 4)
            #expect(sticker("hat", in: last)?["frame"]?["x"]?.doubleValue == 40, "rolled back: \(last.text)")

            await watcher.close()
            #expect(await coordinator.stop() == 0)
        }
    }

    /// Alice asks Bob with a first message, Bob accepts, answers and reads, Alice
    /// answers and reads, Bob reads: one conversation, three messages, all read.
    @Test func twoAgentDMChat() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let aliceWatch = try await TestPeer.connect(broker: broker, user: "alice")
            let aliceAgent = Agent(broker: broker, user: "alice")
            let bobAgent = Agent(broker: broker, user: "bob")
            var files: [String] = []
            defer { for f in files { try? FileManager.default.removeItem(atPath: f) } }
            func run(_ agent: Agent, _ lines: [String]) async throws -> ChildProcess {
                let input = try Agent.inputFile(lines)
                files.append(input)
                let child = try await agent.run(["dm"], json: false, standardInput: input)
                #expect(child.termination == .exited(0), "\(agent.user): \(lines): \(child.transcript)")
                return child
            }

            _ = try await run(aliceAgent, ["request bob Hi Bob, coffee later?"])
            let bob = try await run(bobAgent, ["accept alice", "send alice Sure, 4 pm?", "read alice"])
            #expect(bob.standardOutput.contains("Hi Bob, coffee later?"), "bob sees alice's request: \(bob.transcript)")
            let alice = try await run(aliceAgent, ["send bob See you then", "read bob", "show bob"])
            #expect(alice.standardOutput.contains("Sure, 4 pm?"), "\(alice.transcript)")
            _ = try await run(bobAgent, ["read alice"])

            let conversation = try await aliceWatch.waitFor(topics.conversation(user: "alice", peer: "bob")) {
                $0["messages"]?.arrayCount == 3 && $0["messages"]?.allRead == true
            }
            #expect(conversation["status"]?.stringValue == "active")
            #expect(conversation["unread"]?.int64Value == 0)
            let texts = conversation["messages"]?.array.compactMap { $0["text"]?.stringValue }
            #expect(texts == ["Hi Bob, coffee later?", "Sure, 4 pm?", "See you then"])
            let senders = conversation["messages"]?.array.compactMap { $0["sender"]?.stringValue }
            #expect(senders == ["alice", "bob", "alice"])

            // A command that is rejected: exit 1, the code printed.
            let input = try Agent.inputFile(["accept alice"])
            files.append(input)
            let again = try await bobAgent.run(["dm"], json: false, standardInput: input)
            #expect(again.termination == .exited(1))
            #expect(again.standardOutput.contains("no_pending_request"), "\(again.transcript)")

            await aliceWatch.close()
            #expect(await coordinator.stop() == 0)
        }
    }

    func sticker(_ id: String, in state: JSON) -> JSON? {
        state["stickers"]?.array.first { $0["id"]?.stringValue == id }
    }
}

extension JSON {
    /// The elements of an array (empty for anything else).
    var array: [JSON] {
        if case .array(let items) = self { return items }
        return []
    }

    var arrayCount: Int { array.count }

    /// Whether every message of an array says `isRead:true`.
    var allRead: Bool { array.allSatisfy { $0["isRead"]?.boolValue == true } }
}
