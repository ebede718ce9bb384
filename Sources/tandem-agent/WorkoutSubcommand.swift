import ArgumentParser
import TandemAgent

struct WorkoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "workout", abstract: "Run a workout as the phone or the watch.")
    @OptionGroup var connection: ConnectionOptions
    func run() async throws { throw ValidationError("workout is not built yet") }
}
