import Foundation
import Testing
import TandemClient
import TestSupport

// No `import TandemCore`: this file sees what an app sees with `import TandemClient`.

/// The README's "In an app" example, as written there, built against `import TandemClient`
/// alone and run against the shipped broker and the built coordinator; and a check that
/// the README still shows exactly this code.
@Suite(.serialized) struct ReadmeExampleTests {
    // README: begin (the README's block, `port: 1883` there)
    func readmeExample(port: Int, render: @escaping @Sendable ([Sticker]) -> Void, show: @escaping @Sendable (ConversationReplica) -> Void) async throws {
        let client = try TandemClient(host: "127.0.0.1", port: port, username: "alice",
                                      password: "alice-demo", clientId: "alice-phone")  // acts as alice
        try await client.connect()                          // presence online; its will says offline

        let room = try await client.room("photo1")          // AsyncStream<RoomReplica>
        Task { for await replica in room { render(replica.visibleStickers) } }
        let receipt = try await client.edit(.create, sticker: "s1", in: "photo1", image: "star.png",
                                            frame: Frame(x: 10, y: 10, width: 64, height: 64))
        print(receipt.status)                               // shown at once, rolled back if rejected

        let chat = try await client.conversation(with: "bob")   // AsyncStream<ConversationReplica>
        Task { for await conversation in chat { show(conversation) } }
        _ = try await client.dm(.request, to: "bob", text: "hi")

        let run = try await client.workout("run1")          // AsyncStream<WorkoutSnapshot>
        Task { for await snapshot in run { print(snapshot.status) } }
        _ = try await client.control(.start, workout: "run1", from: .phone, mode: .mirrored)
        await client.close()                                // offline, retained presence cleared
    }
    // README: end

    @Test func theExampleRunsAgainstTheRealParts() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let seen = Seen()
            do {
                try await readmeExample(port: Int(broker.port), render: { seen.stickers($0.map(\.id)) }, show: { seen.conversation($0.status?.rawValue ?? "none") })
                #expect(seen.lastStickers == ["s1"])
            } catch {
                Issue.record("coordinator log:\n\(coordinator.standardError.suffix(3000))")
                await coordinator.stop()
                throw error
            }
            await coordinator.stop()
        }
    }

    @Test func theReadmeShowsThisCode() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let this = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        func normalized(_ lines: some Sequence<Substring>) -> [String] {
            lines.map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }.filter { !$0.isEmpty }
                .map { $0.replacingOccurrences(of: "port: port", with: "port: 1883") }
        }
        let block = readme.components(separatedBy: "## In an app")[1].components(separatedBy: "```swift\n")[1].components(separatedBy: "\n```")[0]
        let shown = normalized(block.split(separator: "\n")).filter { $0 != "import TandemClient" }
        let body = this.components(separatedBy: "// README: begin")[1].components(separatedBy: "// README: end")[0]
        let example = normalized(body.split(separator: "\n").dropFirst().dropLast())
        // The function's own first and last lines are not the README's.
        #expect(shown == Array(example.dropFirst().dropLast()), "README.md's example and ReadmeExampleTests differ")
    }
}

/// What the example's closures saw, from its tasks.
final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var stickerIds: [String] = []
    private var statuses: [String] = []

    func stickers(_ ids: [String]) { lock.withLock { stickerIds = ids } }
    func conversation(_ status: String) { lock.withLock { statuses.append(status) } }
    var lastStickers: [String] { lock.withLock { stickerIds } }
}
