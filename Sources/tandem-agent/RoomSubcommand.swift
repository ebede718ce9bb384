import ArgumentParser
import TandemAgent

struct RoomCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "room", abstract: "Join a room and edit its stickers from stdin.")
    @OptionGroup var connection: ConnectionOptions
    func run() async throws { throw ValidationError("room is not built yet") }
}
