import ArgumentParser
import TandemAgent
import TandemCore

struct DMHistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Print older messages of a conversation (a page from the coordinator's history) and exit."
    )

    @Argument(help: "The other participant.")
    var peer: String

    @Option(help: "Only messages sent strictly before this time (milliseconds since the Unix epoch).")
    var before: Int64?

    @Option(help: "How many messages (1-200; default 50).")
    var limit: Int?

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard Identifier.isValid(peer) else {
            throw ValidationError("Invalid value for '<peer>': '\(peer)' must be 1-64 characters of A-Z a-z 0-9 _ . -")
        }
        if let limit, !(1...200).contains(limit) {
            throw ValidationError("Invalid value for '--limit': \(limit) is not in 1-200.")
        }
        if let before, before <= 0 {
            throw ValidationError("Invalid value for '--before': \(before) must be a positive time in milliseconds.")
        }
    }

    func run() async throws {
        try await runAgent(connection, oneShot: true) { session in
            try await QueryAgent(session: session).history(peer: peer, before: before, limit: limit)
        }
    }
}
