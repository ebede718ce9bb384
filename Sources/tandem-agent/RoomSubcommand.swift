import ArgumentParser
import TandemAgent
import TandemCore

struct RoomCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "room",
        abstract: "Join a room: show its stickers and edit them from stdin.",
        discussion: """
            Commands (one per line on stdin):
            \(RoomInput.helpText)

            With stdin closed it finishes the commands it was given, waits for their \
            receipts (up to 30 s) and exits 0, or 1 if any was rejected or unanswered.
            """
    )

    @Option(help: "The room id.")
    var room: String

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard Identifier.isValid(room) else {
            throw ValidationError("Invalid value for '--room': '\(room)' must be 1-64 characters of A-Z a-z 0-9 _ . -")
        }
    }

    func run() async throws {
        try await runAgent(connection) { session in
            try await RoomAgent(session: session, roomId: room).run(input: StandardInput.lines())
        }
    }
}
