import ArgumentParser

@main
struct TandemAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tandem-agent",
        abstract: "A Tandem peer on the command line: room member, DM user, workout device.",
        subcommands: [RoomCommand.self, DMCommandGroup.self, WorkoutCommand.self, LogbookCommand.self]
    )
}
