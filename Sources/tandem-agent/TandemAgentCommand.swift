import ArgumentParser
import Foundation
import TandemCore

@main
struct TandemAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tandem-agent",
        abstract: "A Tandem peer on the command line: room member, DM user, workout device.",
        version: TandemVersion.current,
        subcommands: [RoomCommandGroup.self, DMCommandGroup.self, WorkoutCommand.self, LogbookCommand.self]
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
        if let unknown = unknownOption(in: arguments) {
            FileHandle.standardError.write(Data(unknown.utf8))
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

    /// A misspelt flag is named as unknown (`--rom photo1`: "Unknown option '--rom'"),
    /// whatever else is wrong: the parser reported a missing required `--room` first.
    /// The flags a command knows are those its help lists.
    static func unknownOption(in arguments: [String]) -> String? {
        var command: any ParsableCommand.Type = TandemAgentCommand.self
        var path = ["tandem-agent"]
        for word in arguments {
            guard !word.hasPrefix("-"),
                  let sub = command.configuration.subcommands.first(where: { $0._commandName == word })
            else { break }
            command = sub
            path.append(word)
        }
        // A group's default subcommand (`dm` is `dm chat`) takes its flags too.
        let commands = [command] + (command.configuration.defaultSubcommand.map { [$0] } ?? [])
        var known: Set<String> = ["--help", "--version", "--experimental-dump-help", "--generate-completion-script"]
        for help in commands.map({ $0.helpMessage(includeHidden: true, columns: 10_000) }) {
            for match in help.matches(of: /--[a-z0-9][a-z0-9-]*/) { known.insert(String(match.output)) }
        }
        for word in arguments {
            if word == "--" { break }
            guard word.hasPrefix("--") else { continue }
            let flag = String(word.split(separator: "=", maxSplits: 1)[0])
            if !known.contains(flag) {
                let name = path.joined(separator: " ")
                return "Error: Unknown option '\(flag)'\nUsage: \(name) <options>\n  See '\(name) --help' for more information.\n"
            }
        }
        return nil
    }
}
