import ArgumentParser
import Foundation
import TandemAgent
import TandemCore

extension Device: ExpressibleByArgument {}
extension StartOrigin: ExpressibleByArgument {}
extension WorkoutMode: ExpressibleByArgument {}

struct WorkoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "workout",
        abstract: "Run a workout as the phone or the watch, following startOrigin.",
        discussion: """
            local: sends start, replays the route (a GPX track, or a built-in demo loop) at \
            1 Hz through the flight computer and publishes flight data every interval. \
            remote: waits for the workout to run with the other device as origin and shows \
            its flight data. The watch publishes health data every second in both roles; \
            the phone shows it. Ctrl-C or --duration sends stop; it exits 0 once finished.
            """
    )

    @Option(help: "This device: phone or watch.")
    var device: Device

    @Option(help: "local: this device starts the workout and runs GPS; remote: it mirrors the other device.")
    var startOrigin: StartOrigin

    @Option(help: "The workout id.")
    var workout: String

    @Option(help: "mirrored or standalone, sent with start (default: the coordinator's, standalone).")
    var mode: WorkoutMode?

    @Option(help: "A GPX track to replay (local only; default: a built-in 3 km loop).")
    var route: String?

    // `.unconditional`: a negative number is read as the value (and refused by
    // validate() with a message about the number) rather than as a missing value.
    @Option(parsing: .unconditional, help: "Send stop after this many seconds of running.")
    var duration: Double?

    @Option(parsing: .unconditional, help: "Seconds between published flight samples (local).")
    var flightInterval: Double = 3

    @Option(parsing: .unconditional, help: "Target pace in seconds per km, for the pace alert (local).")
    var targetPace: Double?

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard Identifier.isValid(workout) else {
            throw ValidationError("Invalid value for '--workout': '\(workout)' must be 1-64 characters of A-Z a-z 0-9 _ . -")
        }
        if let duration, !(duration > 0 && duration.isFinite) {
            throw ValidationError("Invalid value for '--duration': \(duration) must be a positive number of seconds.")
        }
        guard flightInterval > 0, flightInterval.isFinite else {
            throw ValidationError("Invalid value for '--flight-interval': \(flightInterval) must be a positive number of seconds.")
        }
        if let targetPace, !(targetPace > 0 && targetPace.isFinite) {
            throw ValidationError("Invalid value for '--target-pace': \(targetPace) must be a positive number of seconds per km.")
        }
        if route != nil, startOrigin == .remote {
            throw ValidationError("'--route' is for --start-origin local only: the remote device never runs GPS.")
        }
    }

    func run() async throws {
        var fixes: [GPSFix]?
        if let route {
            let text: String
            do {
                text = try String(contentsOfFile: route, encoding: .utf8)
            } catch {
                let reason = FileManager.default.fileExists(atPath: route) ? "it is not readable UTF-8 text" : "no such file"
                FileHandle.standardError.write(Data("error: cannot read the route \(route): \(reason)\n".utf8))
                throw ExitCode(1)
            }
            do {
                fixes = try GPX.parse(text)
            } catch {
                FileHandle.standardError.write(Data("error: the route \(route) is not a usable GPX track: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
        let options = WorkoutOptions(
            device: device, startOrigin: startOrigin, workoutId: workout, mode: mode, route: fixes,
            duration: duration, targetPace: targetPace)
        let signals = SignalWatcher()
        try await runAgent(connection, flightInterval: Millis((flightInterval * 1_000).rounded())) { session in
            try await WorkoutAgent(session: session, options: options).run(signals: signals.signals)
        }
    }
}
