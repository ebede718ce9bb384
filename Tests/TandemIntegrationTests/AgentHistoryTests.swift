import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 35 in `tandem-agent`: `history`, `restore V`, `undo` and `redo` in a room's
/// script, and the one-shot `room history`, run as the real binary.
@Suite(.serialized) struct AgentHistoryTests {
    static let agent = CoordinatorProcess.binary("tandem-agent")

    @Test(.timeLimit(.minutes(2)))
    func aScriptReadsTheHistoryUndoesRedoesAndRestores() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = Agent(broker: broker, user: "alice")
            let input = try Agent.inputFile([
                "create s1 a.png 1 1 10 10",  // v1
                "move s1 5 5",  // v2
                "create s2 b.png 2 2 10 10",  // v3
                "delete s2",  // v4
                "history",
                "undo",  // the delete: s2 again under a new id (v5), released (v6)
                "undo",  // the create of s2: the sticker under its new id deleted (v7)
                "undo",  // the move: s1 back to 1 1 (v8); alice holds it since her create
                "redo",  // s1 to 5 5 (v9)
                "restore 2",  // v10: s1 at 5 5, nothing else
                "undo",  // nothing: the restore cleared it
                "history",
            ])
            let run = try await alice.run(["room", "--room", "script-history"], standardInput: input)
            #expect(run.termination?.code == 0, "\(run.transcript)")

            let pages = run.objects("history")
            #expect(pages.count == 2, "\(run.transcript)")
            let first = pages.first?["entries"]?.arrayValue ?? []
            #expect(first.map { $0["version"]?.int64Value } == [4, 3, 2, 1], "\(run.transcript)")
            #expect(first.map { $0["type"]?.stringValue } == ["delete", "create", "update", "create"])
            #expect(first.map { $0["stickerId"]?.stringValue } == ["s2", "s2", "s1", "s1"])
            #expect(pages.first?["version"]?.int64Value == 4 && pages.first?["roomId"] == "script-history")
            let last = pages.last?["entries"]?.arrayValue?.first
            #expect(last?["type"] == "restore" && last?["version"]?.int64Value == 10 && last?["userId"] == "alice", "\(run.transcript)")

            #expect(run.objects("undo").map { $0["status"]?.stringValue } == ["nothing"], "\(run.transcript)")
            let receipts = run.objects("receipt")
            #expect(receipts.allSatisfy { $0["status"] == "accepted" }, "\(receipts.map(\.text))")
            // The room as the restore left it: s1 where it was at version 2, unlocked; the
            // sticker the undo made again is gone.
            let final = try #require(run.objects("snapshot").last)
            let stickers = final["stickers"]?.arrayValue ?? []
            #expect(final["version"]?.int64Value == 10, "\(final.text)")
            #expect(stickers.map { $0["id"]?.stringValue } == ["s1"], "\(final.text)")
            #expect(stickers.first?["frame"]?["x"]?.doubleValue == 5 && stickers.first?["owner"]?.isNull == true, "\(final.text)")
            // Along the way the undo brought s2 back under another id, and s1 back to 1 1.
            let snapshots = run.objects("snapshot")
            #expect(snapshots.contains { ($0["stickers"]?.arrayValue ?? []).contains { $0["id"]?.stringValue?.hasPrefix("s2-") == true } })
            let atEight = snapshots.filter { $0["version"]?.int64Value == 8 }.map { snapshot in
                (snapshot["stickers"]?.arrayValue ?? []).map { "\($0["id"]?.stringValue ?? "") \($0["frame"]?["x"]?.doubleValue ?? -1) \($0["owner"]?.stringValue ?? "-")" }
            }
            #expect(atEight.contains(["s1 1.0 alice"]), "\(atEight)")

            // The one-shot query: a table for people, the same page with --json.
            let table = try await alice.run(["room", "history", "--room", "script-history", "--limit", "3"], json: false)
            #expect(table.termination?.code == 0, "\(table.transcript)")
            #expect(table.standardOutput.hasPrefix("room script-history · version 10 · restorable back to version "), "\(table.transcript)")
            #expect(table.standardOutput.contains("10       restore  -        alice"), "\(table.transcript)")
            #expect(table.standardOutput.contains("… older changes: tandem-agent room history --room script-history --before 8"), "\(table.transcript)")
            let json = try await alice.run(["room", "history", "--room", "script-history", "--before", "3"])
            #expect(json.objects("history").first?["entries"]?.arrayValue?.map { $0["version"]?.int64Value } == [2, 1], "\(json.transcript)")
            // The same for people: what each undo and redo did, in one line.
            let human = try await alice.run(["room", "--room", "script-history-human"], json: false, standardInput: input)
            #expect(human.termination?.code == 0, "\(human.transcript)")
            let said = human.standardOutput
            #expect(said.contains("undone: delete s2 (the sticker is back as s2-"), "\(human.transcript)")
            #expect(said.contains("undone: create s2-"), "\(human.transcript)")
            #expect(said.contains("undone: update s1") && said.contains("redone: update s1"), "\(human.transcript)")
            #expect(said.contains("nothing to undo"), "\(human.transcript)")
            #expect(said.contains("room script-history-human · version 4 · restorable back to version "), "\(human.transcript)")
            #expect(said.contains("4        delete  s2       alice"), "\(human.transcript)")

            // bob is not a member: one line, exit 1.
            let stranger = try await Agent(broker: broker, user: "bob").run(["room", "history", "--room", "script-history"], json: false)
            #expect(stranger.termination?.code == 1, "\(stranger.transcript)")
            #expect(stranger.standardError.contains("not_member"), "\(stranger.transcript)")
            #expect(await coordinator.stop() == 0)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func badHistoryAndRestoreInputIsSaidShortly() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let input = try Agent.inputFile(["create s1 a.png 1 1 10 10", "restore x", "history 0", "undo now", "restore 1"])
            let run = try await Agent(broker: broker, user: "alice").run(["room", "--room", "bad-lines"], json: false, standardInput: input)
            // A line that is not a command makes a script exit 64, as a bad flag does; a
            // restore to the current version is refused by the coordinator.
            #expect(run.termination?.code == 64, "\(run.transcript)")
            #expect(run.standardError.contains("VERSION must be a version, a whole number from 1, not \"x\""), "\(run.transcript)")
            #expect(run.standardError.contains("BEFORE must be a version"), "\(run.transcript)")
            #expect(run.standardError.contains("too many arguments; usage: undo"), "\(run.transcript)")
            #expect(run.standardOutput.contains("rejected: restore 1: invalid_payload: "), "\(run.transcript)")

            for (flags, fragment) in [(["--limit", "0"], "--limit"), (["--before", "0"], "--before"), (["--before", "x"], "--before")] {
                let refused = try await Agent(broker: broker, user: "alice").run(["room", "history", "--room", "bad-lines"] + flags, json: false)
                #expect(refused.termination?.code == 64, "\(flags): \(refused.transcript)")
                #expect(refused.standardError.contains(fragment), "\(flags): \(refused.transcript)")
            }
            let noRoom = try await ChildProcess.run(Self.agent, ["room", "history", "--user", "alice"])
            #expect(noRoom.exitCode == 64, "\(noRoom.standardError)")
            let help = try await ChildProcess.run(Self.agent, ["room", "history", "--help"])
            #expect(help.standardOutput.contains("--before") && !help.standardOutput.contains("one per line on stdin"), "\(help.standardOutput)")
            #expect(await coordinator.stop() == 0)
        }
    }
}
