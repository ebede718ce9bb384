import ArgumentParser
import TandemAgent
import TandemCore

/// `dm` is a group: `dm` alone (or `dm chat`) is the chat, `dm history` the query. With
/// the chat as the group's own run(), `dm history --help` printed the chat's help.
struct DMCommandGroup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dm",
        abstract: "Direct messages: the chat (default), or a conversation's history.",
        subcommands: [DMChatCommand.self, DMHistoryCommand.self],
        defaultSubcommand: DMChatCommand.self
    )
}

struct DMChatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat",
        abstract: "Direct messages: show every conversation, then take commands on stdin.",
        discussion: """
            Commands (one per line on stdin):
            \(DMInput.helpText)

            With stdin closed it finishes the commands it was given, waits for their \
            receipts (up to 30 s) and exits 0, or 1 if any was rejected or unanswered \
            (64 if a line could not be understood).
            """
    )

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await runAgent(connection) { session in
            try await DMAgent(session: session).run(input: StandardInput.lines())
        }
    }
}
