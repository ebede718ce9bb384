import ArgumentParser
import TandemAgent

struct LogbookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logbook",
        abstract: "List the finished workouts of --user (newest first) and exit."
    )

    @Option(help: "How many workouts (1-200; default 50).")
    var limit: Int?

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        if let limit, !(1...200).contains(limit) {
            throw ValidationError("Invalid value for '--limit': \(limit) is not in 1-200.")
        }
    }

    func run() async throws {
        try await runAgent(connection, oneShot: true) { session in
            try await QueryAgent(session: session).logbook(limit: limit)
        }
    }
}
