import ArgumentParser
import TandemAgent
import TandemCore

/// `room` is a group, as `dm` is: `room` alone (or `room join`) is the interactive member,
/// `room history` the one-shot query.
struct RoomCommandGroup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "room",
        abstract: "Rooms: join one and edit it (default), or print its history.",
        subcommands: [RoomCommand.self, RoomHistoryCommand.self],
        defaultSubcommand: RoomCommand.self
    )
}

struct RoomCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
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
        try validateRoom(room)
    }

    func run() async throws {
        try await runAgent(connection) { session in
            try await RoomAgent(session: session, roomId: room).run(input: StandardInput.lines())
        }
    }
}

struct RoomHistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Print a room's changes (newest first) and the oldest version a restore can reach, and exit."
    )

    @Option(help: "The room id.")
    var room: String

    @Option(help: "Only changes with a version below this one.")
    var before: Int64?

    @Option(help: "How many changes (1-200; default 50).")
    var limit: Int?

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        try validateRoom(room)
        if let limit, !(1...200).contains(limit) {
            throw ValidationError("Invalid value for '--limit': \(limit) is not in 1-200.")
        }
        if let before, before < 1 {
            throw ValidationError("Invalid value for '--before': \(before) must be a version, a whole number from 1.")
        }
    }

    func run() async throws {
        try await runAgent(connection, oneShot: true) { session in
            try await QueryAgent(session: session).roomHistory(room: room, before: before, limit: limit)
        }
    }
}

private func validateRoom(_ room: String) throws {
    guard Identifier.isValid(room) else {
        throw ValidationError("Invalid value for '--room': '\(room)' must be 1-64 characters of A-Z a-z 0-9 _ . -")
    }
}
