import ArgumentParser

@main
struct CoreBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tandem-corebench",
        abstract: "In-process benchmarks of Tandem's pure core and its Engine (build with -c release).",
        subcommands: [Micro.self, Populate.self, Recover.self, PartitionsBench.self, RestoreBench.self],
        defaultSubcommand: Micro.self
    )
}

struct Micro: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "micro", abstract: "Reducer, reorder buffer, DM, payloads, Engine.")

    @Option(help: "Events per benchmark run.") var events = 1_000_000
    @Option(help: "Rooms (Engine benchmark).") var rooms = 100
    @Option(help: "Stickers per room.") var stickers = 50
    @Option(help: "Runs per benchmark; the best (least CPU time) is reported.") var repeats = 5
    @Flag(help: "JSON lines instead of a table.") var json = false

    func run() {
        let results = CoreBenchmarks(events: events, rooms: rooms, stickers: stickers, repeats: repeats).runAll()
        if json {
            for r in results {
                print("{\"name\":\"\(r.name)\",\"operations\":\(r.operations),\"perCPUSecond\":\(Int(r.perCPUSecond)),\"perWallSecond\":\(Int(r.perWallSecond)),\"nsPerOp\":\(Int(r.nanosPerOperation))}")
            }
            return
        }
        let width = results.map(\.name.count).max() ?? 10
        print("benchmark".padding(toLength: width, withPad: " ", startingAt: 0) + "   ops/s (CPU)   ops/s (wall)   ns/op (CPU)")
        for r in results {
            print(r.name.padding(toLength: width, withPad: " ", startingAt: 0)
                + pad(Int(r.perCPUSecond), 14) + pad(Int(r.perWallSecond), 15) + pad(Int(r.nanosPerOperation), 14))
        }
    }

    func pad(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return String(repeating: " ", count: max(0, width - s.count)) + s
    }
}
