import ArgumentParser
import CMalloc
import Foundation
import Logging
import ServiceLifecycle
import TandemCommandLine
import TandemCore
import TandemLogging
import TandemWeb

@main
struct TandemWebCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tandem-web",
        abstract: "Tandem in a browser: the page, and one MQTT session per signed-in person through TandemClient.",
        discussion: """
            It has no broker account of its own: each person signs in with their own broker username and \
            password, and the broker's rules apply to the page as to any app. Every option can also be set \
            with the environment variable in brackets; a flag wins over the variable.
            """,
        version: TandemVersion.current
    )

    @OptionGroup(title: "Broker")
    var broker: BrokerOptions

    @Option(help: Self.httpHost.help("Address the web server listens on"))
    var httpHost: String?

    @Option(help: Self.httpPort.help("Port the web server listens on"))
    var httpPort: Int?

    @Option(help: Self.tabGraceSeconds.help("Seconds a session lives after its last tab closed (a reload fits in it)", valueName: "seconds"))
    var tabGraceSeconds: Double?

    @Option(help: Self.framesPerSecond.help("Frames a session may send each second before the next ones wait"))
    var framesPerSecond: Double?

    @OptionGroup var logging: LoggingOptions

    static let httpHost = Setting<String>.text("http-host", "TANDEM_HTTP_HOST", default: "127.0.0.1", check: {
        $0.isEmpty ? "must not be empty" : nil
    })
    static let httpPort = Setting<Int>.integer("http-port", "TANDEM_HTTP_PORT", default: 8080, range: 0...65535)
    static let tabGraceSeconds = Setting<Double>.seconds("tab-grace-seconds", "TANDEM_TAB_GRACE_SECONDS", default: 5)
    static let framesPerSecond = Setting<Double>.number("frames-per-second", "TANDEM_FRAMES_PER_SECOND", default: 50, maximum: 100_000)

    struct Settings {
        var web: WebSettings
        var host: String
        var port: Int
        var level: Logger.Level
        var format: LogFormat
    }

    func resolve(environment env: [String: String]) throws -> Settings {
        let address = try broker.resolve(in: env)
        let rate = try Self.framesPerSecond.value(framesPerSecond, in: env)
        let web = WebSettings(
            brokerHost: address.host, brokerPort: address.port, tls: address.tls, topicRoot: address.topicRoot,
            tabGrace: .milliseconds(Int64(try Self.tabGraceSeconds.value(tabGraceSeconds, in: env) * 1000)),
            framesPerSecond: rate, frameBurst: max(1, rate * 2))
        let (level, format) = try logging.resolve(in: env)
        return Settings(
            web: web, host: try Self.httpHost.value(httpHost, in: env), port: try Self.httpPort.value(httpPort, in: env),
            level: level, format: format)
    }

    func validate() throws {
        _ = try resolve(environment: ProcessInfo.processInfo.environment)
    }

    func run() async throws {
        // At most two malloc arenas (as the coordinator), before the threads that would
        // each make one. MALLOC_ARENA_MAX in the environment still wins.
        if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil { _ = mallopt(M_ARENA_MAX, 2) }
        let settings = try resolve(environment: ProcessInfo.processInfo.environment)
        let (level, format) = (settings.level, settings.format)
        LoggingSystem.bootstrap { label in format.handler(label: label, level: level) }
        let logger = Logger(label: "tandem.web")
        let files = Self.raiseOpenFileLimit()
        var web = settings.web
        web.maxSessions = SessionStore.sessionLimit(openFiles: Int(files))
        logger.info("open files: at most \(files), about \(SessionStore.descriptorsPerSession) a signed-in session: at most \(web.maxSessions) sessions")
        let store: SessionStore
        do {
            store = try SessionStore(settings: web, logger: logger)
        } catch {
            logger.critical("cannot start the MQTT loop", error: error)
            throw ExitCode(1)
        }
        let app = WebServer.application(store: store, host: settings.host, port: settings.port, logger: logger)
        do {
            try await app.runService(gracefulShutdownSignals: [.sigterm, .sigint])
        } catch {
            logger.critical("stopped", error: error)
            throw ExitCode(1)
        }
    }

    /// Each signed-in session holds about four descriptors (its MQTT socket,
    /// libmosquitto's wake-up pair, a WebSocket); a soft limit of 1,024, a common
    /// default, would stop the process at about 250 sessions. Raised to the hard limit,
    /// as servers do, and the hard limit itself to ``wantedOpenFiles`` where the process
    /// may (root, or CAP_SYS_RESOURCE): 10,000 sessions need about 40,000. Returns the
    /// limit in force.
    static func raiseOpenFileLimit() -> UInt {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_max < wantedOpenFiles {
            var raised = limit
            raised.rlim_cur = wantedOpenFiles
            raised.rlim_max = wantedOpenFiles
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return UInt(wantedOpenFiles) }
        }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return UInt(limit.rlim_cur)
    }

    /// The open files tandem-web asks for when the hard limit is lower: 10,000 sessions
    /// at four each, and room to spare.
    static let wantedOpenFiles: rlim_t = 65_536
}
