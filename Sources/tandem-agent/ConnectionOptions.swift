import ArgumentParser
import Foundation
import Logging
import TandemAgent
import TandemCore
import TandemMQTT

/// The options every subcommand takes. Each falls back to an environment variable (in
/// brackets in the help), then to its default; a flag wins over the variable.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "Broker host [TANDEM_MQTT_HOST] (default: 127.0.0.1).")
    var host: String?

    @Option(help: "Broker port [TANDEM_MQTT_PORT] (default: 1883).")
    var port: Int?

    @Option(help: "MQTT username [TANDEM_MQTT_USERNAME]; none connects anonymously.")
    var username: String?

    @Option(help: "MQTT password [TANDEM_MQTT_PASSWORD]; prefer --password-file, which no other user can read in the process list.")
    var password: String?

    @Option(help: ArgumentHelp("Read the MQTT password from this file's first line [TANDEM_MQTT_PASSWORD_FILE].", valueName: "path"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("Connect with TLS, verifying the broker's certificate and host name against this CA file [TANDEM_MQTT_CA_FILE].", valueName: "path"))
    var tlsCaFile: String?

    @Option(help: ArgumentHelp("Client certificate for TLS [TANDEM_MQTT_CERT_FILE].", valueName: "path"))
    var tlsCertFile: String?

    @Option(help: ArgumentHelp("Client certificate's private key [TANDEM_MQTT_KEY_FILE].", valueName: "path"))
    var tlsKeyFile: String?

    @Option(help: "Topic root [TANDEM_TOPIC_ROOT] (default: tandem/v1).")
    var topicRoot: String?

    @Option(help: "The userId to act as [TANDEM_USER] (default: the username).")
    var user: String?

    @Option(help: ArgumentHelp("Seconds a script or a one-shot command waits for the broker before it gives up with exit 1 [TANDEM_CONNECT_TIMEOUT] (default: 10). An interactive session (stdin a terminal) keeps trying.", valueName: "seconds"))
    var connectTimeout: Double?

    @Flag(help: "One JSON object per line on stdout instead of human output.")
    var json = false

    @Option(help: "Log level on stderr [TANDEM_LOG_LEVEL]: trace, debug, info, notice, warning, error (default: warning).")
    var logLevel: String?

    private static var environment: [String: String] { ProcessInfo.processInfo.environment }

    private static func env(_ name: String) -> String? {
        guard let value = environment[name], !value.isEmpty else { return nil }
        return value
    }

    var resolvedHost: String { host ?? Self.env("TANDEM_MQTT_HOST") ?? "127.0.0.1" }
    var resolvedUsername: String? { username ?? Self.env("TANDEM_MQTT_USERNAME") }
    /// Password and TLS, checked together (see MQTTSecuritySettings).
    var security: MQTTSecuritySettings {
        MQTTSecuritySettings(
            password: password ?? Self.env("TANDEM_MQTT_PASSWORD"),
            passwordFile: passwordFile ?? Self.env("TANDEM_MQTT_PASSWORD_FILE"),
            caFile: tlsCaFile ?? Self.env("TANDEM_MQTT_CA_FILE"),
            certFile: tlsCertFile ?? Self.env("TANDEM_MQTT_CERT_FILE"),
            keyFile: tlsKeyFile ?? Self.env("TANDEM_MQTT_KEY_FILE"))
    }
    var resolvedTopicRoot: String { topicRoot ?? Self.env("TANDEM_TOPIC_ROOT") ?? Topics.defaultRoot }
    var resolvedUser: String? { user ?? Self.env("TANDEM_USER") ?? resolvedUsername }

    var resolvedPort: Int {
        if let port { return port }
        if let text = Self.env("TANDEM_MQTT_PORT"), let value = Int(text) { return value }
        return 1883
    }

    var resolvedLogLevel: Logger.Level {
        Logger.Level(rawValue: (logLevel ?? Self.env("TANDEM_LOG_LEVEL") ?? "warning").lowercased()) ?? .warning
    }

    func validate() throws {
        if let port, !(1...65535).contains(port) {
            throw ValidationError("Invalid value for '--port': \(port) is not a port (1-65535).")
        }
        if port == nil, let text = Self.env("TANDEM_MQTT_PORT"), Int(text).map({ (1...65535).contains($0) }) != true {
            throw ValidationError("Invalid value for TANDEM_MQTT_PORT: '\(text)' is not a port (1-65535).")
        }
        guard let user = resolvedUser else {
            throw ValidationError("Missing '--user' (or '--username'): the agent needs a userId to act as.")
        }
        guard Identifier.isValid(user) else {
            throw ValidationError("Invalid value for '--user': '\(user)' must be 1-64 characters of A-Z a-z 0-9 _ . -")
        }
        let root = resolvedTopicRoot
        if root.isEmpty || root.hasSuffix("/") || root.contains("+") || root.contains("#") {
            throw ValidationError("Invalid value for '--topic-root': '\(root)' must be a topic without wildcards or a trailing '/'.")
        }
        if let connectTimeout, !(connectTimeout.isFinite && connectTimeout > 0) {
            throw ValidationError("Invalid value for '--connect-timeout': \(connectTimeout) is not a positive number of seconds.")
        }
        if connectTimeout == nil, let text = Self.env("TANDEM_CONNECT_TIMEOUT"), Double(text).map({ $0.isFinite && $0 > 0 }) != true {
            throw ValidationError("Invalid value for TANDEM_CONNECT_TIMEOUT: '\(text)' is not a positive number of seconds.")
        }
        do {
            _ = try security.resolve()
        } catch {
            throw ValidationError(error.message)
        }
        if let logLevel, Logger.Level(rawValue: logLevel.lowercased()) == nil {
            throw ValidationError("Invalid value for '--log-level': '\(logLevel)'.")
        }
    }

    /// `oneShot`: a command that answers once and exits (logbook, dm history) gives up
    /// on an unreachable broker after the timeout even from a terminal; so does any
    /// command whose stdin is not a terminal (a script).
    func configuration(oneShot: Bool, flightInterval: Millis = 3_000) throws -> AgentConfiguration {
        let (password, tls) = try security.resolve()
        let seconds = connectTimeout ?? Self.env("TANDEM_CONNECT_TIMEOUT").flatMap(Double.init) ?? 10
        let scripted = oneShot || isatty(0) != 1
        return AgentConfiguration(
            host: resolvedHost, port: resolvedPort, username: resolvedUsername, password: password,
            topicRoot: resolvedTopicRoot, user: resolvedUser ?? "", json: json, tls: tls,
            connectTimeout: scripted ? .milliseconds(Int64(seconds * 1000)) : nil, flightInterval: flightInterval
        )
    }

    /// Logging to stderr at the chosen level, the console, and the session (not yet
    /// connected).
    func makeSession(oneShot: Bool, flightInterval: Millis) throws -> AgentSession {
        let level = resolvedLogLevel
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
