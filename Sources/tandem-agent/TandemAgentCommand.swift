import ArgumentParser
import Foundation
import TandemCore

@main
struct TandemAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tandem-agent",
        abstract: "A Tandem peer on the command line: room member, DM user, workout device.",
        version: TandemVersion.current,
        subcommands: [RoomCommand.self, DMCommandGroup.self, WorkoutCommand.self, LogbookCommand.self]
    )

    static let subcommandNames = ["room", "dm", "workout", "logbook", "help"]

    /// An unknown first word is named as an unknown subcommand: without this the parser
    /// blamed the first option after it (`tandem-agent romo --room x`: "Unknown option
    /// '--room'").
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let first = arguments.first, !first.hasPrefix("-"), !subcommandNames.contains(first) {
            let message = "Error: unknown subcommand '\(first)': expected one of room, dm, workout, logbook\n"
                + "Usage: tandem-agent <subcommand>\n  See 'tandem-agent --help' for more information.\n"
            FileHandle.standardError.write(Data(message.utf8))
            Foundation.exit(64)
        }
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}
