import ArgumentParser
import TandemAgent
import TandemCore

struct DMCommandGroup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dm",
        abstract: "Direct messages: show every conversation, then take commands on stdin.",
        discussion: """
            Commands (one per line on stdin):
            \(DMInput.helpText)

            With stdin closed it finishes the commands it was given, waits for their \
            receipts (up to 30 s) and exits 0, or 1 if any was rejected or unanswered.
            """,
        subcommands: [DMHistoryCommand.self]
    )

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await runAgent(connection) { session in
            try await DMAgent(session: session).run(input: StandardInput.lines())
        }
    }
}
