import ArgumentParser
import Foundation
import Logging
import TandemAgent
import TandemCommandLine
import TandemCore
import TandemMQTT

/// The options every subcommand takes. Each falls back to an environment variable (in
/// brackets in the help), then to its default; a flag wins over the variable.
struct ConnectionOptions: ParsableArguments {
    @OptionGroup(title: "Broker")
    var broker: BrokerOptions

    @OptionGroup(title: "Broker account")
    var account: BrokerAccountOptions

    static let user = Setting<String>.text("user", "TANDEM_USER", shown: "the username", check: {
        Identifier.isValid($0) ? nil : "must be 1-64 characters of A-Z a-z 0-9 _ . -"
    })
    static let connectTimeout = Setting<Double>.seconds("connect-timeout", "TANDEM_CONNECT_TIMEOUT", default: 10)
    static let logLevel = LoggingOptions.level(default: .warning)

    @Option(help: Self.user.help("The userId to act as"))
    var user: String?

    @Option(help: Self.connectTimeout.help("Seconds a script or a one-shot command waits for the broker before it gives up with exit 1. An interactive session (stdin a terminal) keeps trying", valueName: "seconds"))
    var connectTimeout: Double?

    @Flag(help: "One JSON object per line on stdout instead of human output.")
    var json = false

    @Option(help: Self.logLevel.help("Log level on stderr: trace, debug, info, notice, warning, error"))
    var logLevel: String?

    private static var environment: [String: String] { ProcessInfo.processInfo.environment }

    func validate() throws {
        let settings = try resolve(in: Self.environment)
        guard settings.user != nil else {
            throw ValidationError("Missing '--user' (or '--username'): the agent needs a userId to act as.")
        }
    }

    /// Every setting, checked (a password file is read once per process).
    func resolve(in environment: [String: String]) throws -> (address: BrokerAddress, username: String?, password: String?, user: String?, connectTimeout: Double, level: Logger.Level) {
        let address = try broker.resolve(in: environment)
        let (username, password) = try account.resolve(in: environment)
        let user = try Self.user.resolve(user, in: environment) ?? username
        if let user, !Identifier.isValid(user) {
            throw ValidationError("--user (the username when --user is not given) must be 1-64 characters of A-Z a-z 0-9 _ . -, not \(user)")
        }
        let timeout = try Self.connectTimeout.value(connectTimeout, in: environment)
        let level = Logger.Level(rawValue: try Self.logLevel.value(logLevel, in: environment).lowercased()) ?? .warning
        return (address, username, password, user, timeout, level)
    }

    /// `oneShot`: a command that answers once and exits (logbook, dm history) gives up
    /// on an unreachable broker after the timeout even from a terminal; so does any
    /// command whose stdin is not a terminal (a script).
    func configuration(oneShot: Bool, flightInterval: Millis = 3_000) throws -> AgentConfiguration {
        let settings = try resolve(in: Self.environment)
        let scripted = oneShot || isatty(0) != 1
        return AgentConfiguration(
            host: settings.address.host, port: settings.address.port, username: settings.username, password: settings.password,
            topicRoot: settings.address.topicRoot, user: settings.user ?? "", json: json, tls: settings.address.tls,
            connectTimeout: scripted ? .milliseconds(Int64(settings.connectTimeout * 1000)) : nil, flightInterval: flightInterval
        )
    }

    /// Logging to stderr at the chosen level, the console, and the session (not yet
    /// connected).
    func makeSession(oneShot: Bool, flightInterval: Millis) throws -> AgentSession {
        let level = try resolve(in: Self.environment).level
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        var logger = Logger(label: "tandem.agent")
        logger.logLevel = level
        return try AgentSession(configuration: configuration(oneShot: oneShot, flightInterval: flightInterval), console: Console(json: json), logger: logger)
    }
}

/// Runs an agent body: an AgentError (or any other) becomes one line on stderr (or an
/// error object with --json) and exit code 1; the body's own code is the exit code.
func runAgent(
    _ options: ConnectionOptions, oneShot: Bool = false, flightInterval: Millis = 3_000, _ body: (AgentSession) async throws -> Int32
) async throws {
    let session: AgentSession
    do {
        session = try options.makeSession(oneShot: oneShot, flightInterval: flightInterval)
    } catch {
        Console(json: options.json).error("\(error)")
        throw ExitCode(1)
    }
    let code: Int32
    do {
        code = try await body(session)
    } catch {
        session.console.error("\(error)")
        await session.close()
        throw ExitCode(1)
    }
    if code != 0 { throw ExitCode(code) }
}

