import ArgumentParser
import CMalloc
import CoreMetrics
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import TandemCommandLine
import TandemCoordinator
import TandemCore
import TandemLogging
import TandemMQTT

@main
struct TandemCoordinatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tandem-coordinator",
        abstract: "The authoritative Tandem coordinator: orders, judges and publishes shared state over MQTT.",
        discussion: "Every option can also be set with the environment variable in brackets; a flag wins over the variable.",
        version: TandemVersion.current
    )

    @OptionGroup(title: "Broker")
    var broker: BrokerOptions

    @OptionGroup(title: "Broker account")
    var account: BrokerAccountOptions

    @Option(help: Self.brokerAdminUsername.help("The broker account that administers room access through mosquitto's dynamic-security plugin; without it the broker does not restrict who reads a room", valueName: "name"))
    var brokerAdminUsername: String?

    @Option(help: Self.brokerAdminPasswordFile.help("Read the broker admin account's password from this file's first line", valueName: "path"))
    var brokerAdminPasswordFile: String?

    @Option(help: Self.clientId.help("MQTT client id"))
    var clientId: String?

    @Option(help: Self.database.help("SQLite database file, or postgres://user:password@host:port/dbname"))
    var database: String?

    @Option(help: Self.leaderLeaseSeconds.help("PostgreSQL: a leader not renewing its lease for this many seconds is replaced by a standby"))
    var leaderLeaseSeconds: Double?

    @Option(help: Self.brokerSilenceSeconds.help("PostgreSQL: a leader that has not heard the broker for this many seconds gives its partitions up; a standby leads only while it hears the broker"))
    var brokerSilenceSeconds: Double?

    @Option(help: Self.partitions.help("Partitions rooms, conversations and workouts are spread over, each with its own leader; fixed when the database is created"))
    var partitions: Int?

    @Option(help: Self.instanceId.help("Names this process on coordinator/instances/{id} and in the lease"))
    var instanceId: String?

    @Option(help: Self.reorderWindowMs.help("Reorder window in milliseconds"))
    var reorderWindowMs: Int?

    @Option(help: Self.maxSkewMs.help("Allowed clock skew in milliseconds"))
    var maxSkewMs: Int?

    @Option(help: Self.turnSpacingUs.help("At load, the least time between two turns of a pipeline's thread, in microseconds: more events per thread switch, and up to this much added to an answer; 0: a turn for every packet"))
    var turnSpacingUs: Int?

    @Option(help: Self.lockLeaseSeconds.help("Lock lease in seconds, fractions allowed"))
    var lockLeaseSeconds: Double?

    @Option(help: Self.presenceGraceSeconds.help("Grace after an owner goes offline, in seconds"))
    var presenceGraceSeconds: Double?

    @OptionGroup var logging: LoggingOptions

    @Option(help: Self.metricsPort.help("Serve GET /metrics (Prometheus) and /healthz over HTTP on this port, 0 for off"))
    var metricsPort: Int?

    @Option(help: Self.metricsHost.help("Address the metrics port listens on"))
    var metricsHost: String?

    @Option(help: Self.rateLimit.help("Events a user may send per second, 0 for no limit"))
    var rateLimit: Double?

    @Option(help: Self.rateLimitBurst.help("Events a user may send at once after a quiet spell"))
    var rateLimitBurst: Double?

    @Option(help: Self.maxStickersPerRoom.help("Live stickers a room may hold"))
    var maxStickersPerRoom: Int?

    @Option(help: Self.maxRoomMembers.help("Members a room may have, owner included"))
    var maxRoomMembers: Int?

    @Option(help: Self.maxConversationsPerUser.help("Conversations a user may be part of"))
    var maxConversationsPerUser: Int?

    @Option(help: Self.conversationSnapshotSeconds.help("While only messages and read marks change, a conversation's retained snapshots go out at most this often (at most 10); a status change publishes them at once", valueName: "seconds"))
    var conversationSnapshotSeconds: Double?

    @Option(help: Self.eventLogRetention.help("How long the event log keeps each processed event: a number and s, m, h or d (36h, 7d), or 0 to keep it for ever", valueName: "duration"))
    var eventLogRetention: String?

    @Option(help: Self.idMemory.help("How much of the 48 hours of remembered ids memory holds (the store answers for older ones): a number and s, m or h (5m)", valueName: "duration"))
    var idMemory: String?

    @Flag(help: "Check the database's integrity, print a summary of what it holds, and exit (1 when the check finds a problem).")
    var check = false

    @Flag(help: "With --check or --backup: print the report as one JSON object.")
    var json = false

    @Option(help: ArgumentHelp(
        "Write a consistent copy of the database to this new file and exit; safe while a coordinator runs on it.",
        valueName: "path"))
    var backup: String?

    func validate() throws {
        if json, !check, backup == nil {
            throw ValidationError("--json goes with --check or --backup")
        }
        // Reads the password files (once per process: MQTTPasswordFile remembers them for run()).
        _ = try resolve(environment: ProcessInfo.processInfo.environment)
    }

    func run() async throws {
        // At most two malloc arenas, before the threads that would each make one: an hour
        // at 1,000 events/s left glibc holding 79 MB in 11 arenas for 12 MB in use, RSS
        // creeping 36 -> 107 MB (docs/PERFORMANCE.md, "An hour at 1,000 events/s").
        // MALLOC_ARENA_MAX in the environment still wins.
        if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil { _ = mallopt(M_ARENA_MAX, 2) }
        let settings = try resolve(environment: ProcessInfo.processInfo.environment)
        let (level, format) = (settings.level, settings.format)
        LoggingSystem.bootstrap { label in format.handler(label: label, level: level) }
        let logger = Logger(label: "tandem.coordinator")
        if check || backup != nil {
            do {
                let report: CoordinatorService.CheckReport
                if let backup {
                    report = try await CoordinatorService.backupDatabase(at: settings.configuration.databasePath, to: backup)
                    print("backup written to \(backup)")
                } else {
                    report = try await CoordinatorService.checkDatabase(at: settings.configuration.databasePath)
                }
                print(json ? report.json : report.text)
                guard report.isSound else {
                    FileHandle.standardError.write(Data("tandem-coordinator: the integrity check found problems (see above)\n".utf8))
                    throw ExitCode(1)
                }
            } catch let exit as ExitCode {
                throw exit
            } catch {
                FileHandle.standardError.write(Data("tandem-coordinator: \(error)\n".utf8))
                throw ExitCode(1)
            }
            return
        }
        let registry = PrometheusCollectorRegistry()
        let factory = MetricsExporter.prometheusFactory(registry: registry, reorderWindowMs: settings.configuration.engine.reorderWindowMs)
        MetricsSystem.bootstrap(factory)
        let exporter = MetricsExporter(factory: factory)
        let health = HealthState(instanceId: settings.configuration.instanceId)
        let service = CoordinatorService(configuration: settings.configuration, logger: logger, health: health, metrics: exporter)
        // The HTTP server first: the group shuts services down in reverse order, so it
        // answers (/healthz: stopping) until the coordinator has drained.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if settings.metricsPort > 0 {
            do {
                let server = try await MetricsServer.bind(
                    host: settings.metricsHost, port: settings.metricsPort, registry: registry, health: health,
                    beforeScrape: { exporter.mirror() }, logger: logger)
                services.append(.init(service: server))
            } catch {
                logger.critical("cannot serve metrics", error: error, metadata: [
                    "http.host": "\(settings.metricsHost)", "http.port": "\(settings.metricsPort)",
                ])
                throw ExitCode(1)
            }
        }
        services.append(.init(service: service))
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        do {
            try await group.run()
        } catch {
            logger.critical("stopped", error: error)
            throw ExitCode(1)
        }
    }

    // Each setting's flag, variable and default, written once (the defaults are
    // CoordinatorConfiguration's): `--help` and resolve(environment:) both read them.
    static let defaults = CoordinatorConfiguration()
    static let brokerAdminUsername = Setting<String>.text("broker-admin-username", "TANDEM_BROKER_ADMIN_USERNAME")
    static let brokerAdminPasswordFile = Setting<String>.text("broker-admin-password-file", "TANDEM_BROKER_ADMIN_PASSWORD_FILE")
    static let clientId = Setting<String>.text("client-id", "TANDEM_CLIENT_ID", default: defaults.clientId, check: {
        $0.isEmpty || $0.utf8.count > 65535 ? "must be 1-65535 bytes" : nil
    })
    static let database = Setting<String>.text("database", "TANDEM_DATABASE", default: defaults.databasePath)
    static let leaderLeaseSeconds = Setting<Double>.number(
        "leader-lease-seconds", "TANDEM_LEADER_LEASE_SECONDS", default: Double(defaults.leaderLeaseMs) / 1000,
        maximum: 86_400, kind: "a number of seconds")
    static let brokerSilenceSeconds = Setting<Double>.number(
        "broker-silence-seconds", "TANDEM_BROKER_SILENCE_SECONDS", default: Double(defaults.brokerSilenceMs) / 1000,
        maximum: 3_600, kind: "a number of seconds")
    static let partitions = Setting<Int>.integer("partitions", "TANDEM_PARTITIONS", default: 1, range: 1...Partitioning.maximum)
    static let instanceId = Setting<String>.text("instance-id", "TANDEM_INSTANCE_ID", shown: "host name and process id", check: {
        Identifier.isValid($0) ? nil : "must be 1-64 characters of A-Z a-z 0-9 _ . -"
    })
    static let reorderWindowMs = Setting<Int>.integer("reorder-window-ms", "TANDEM_REORDER_WINDOW_MS", default: Int(defaults.engine.reorderWindowMs), range: 0...60_000)
    static let maxSkewMs = Setting<Int>.integer("max-skew-ms", "TANDEM_MAX_SKEW_MS", default: Int(defaults.engine.maxSkewMs), range: 0...86_400_000)
    static let turnSpacingUs = Setting<Int>.integer(
        "turn-spacing-us", "TANDEM_TURN_SPACING_US",
        default: Int(defaults.turnSpacing.components.attoseconds / 1_000_000_000_000), range: 0...20_000)
    static let lockLeaseSeconds = Setting<Double>.seconds("lock-lease-seconds", "TANDEM_LOCK_LEASE_SECONDS", default: Double(defaults.engine.lockLeaseMs) / 1000)
    static let presenceGraceSeconds = Setting<Double>.seconds("presence-grace-seconds", "TANDEM_PRESENCE_GRACE_SECONDS", default: Double(defaults.engine.presenceGraceMs) / 1000)
    static let metricsPort = Setting<Int>.integer("metrics-port", "TANDEM_METRICS_PORT", default: 0, range: 0...65535)
    static let metricsHost = Setting<String>.text("metrics-host", "TANDEM_METRICS_HOST", default: "127.0.0.1", check: {
        $0.isEmpty ? "must not be empty" : nil
    })
    static let rateLimit = Setting<Double>.number("rate-limit", "TANDEM_RATE_LIMIT", default: defaults.engine.rateLimitPerSecond, allowZero: true)
    static let rateLimitBurst = Setting<Double>.number("rate-limit-burst", "TANDEM_RATE_LIMIT_BURST", default: defaults.engine.rateLimitBurst)
    static let maxStickersPerRoom = Setting<Int>.integer("max-stickers-per-room", "TANDEM_MAX_STICKERS_PER_ROOM", default: defaults.engine.maxStickersPerRoom, range: 1...1_000_000)
    static let maxRoomMembers = Setting<Int>.integer("max-room-members", "TANDEM_MAX_ROOM_MEMBERS", default: defaults.engine.maxRoomMembers, range: 1...10_000)
    static let maxConversationsPerUser = Setting<Int>.integer(
        "max-conversations-per-user", "TANDEM_MAX_CONVERSATIONS_PER_USER", default: defaults.engine.maxConversationsPerUser, range: 1...1_000_000)
    static let conversationSnapshotSeconds = Setting<Double>.number(
        "conversation-snapshot-seconds", "TANDEM_CONVERSATION_SNAPSHOT_SECONDS",
        default: Double(defaults.engine.conversationSnapshotIntervalMs) / 1000, maximum: 10, kind: "a number of seconds")
    static let eventLogRetention = Setting<String>.text(
        "event-log-retention", "TANDEM_EVENT_LOG_RETENTION",
        default: defaults.engine.eventLogRetentionMs.map { "\($0 / 86_400_000)d" } ?? "0",
        check: { Self.duration($0) == nil ? "must be a number and s, m, h or d (7d), or 0 for ever" : nil })
    static let idMemory = Setting<String>.text(
        "id-memory", "TANDEM_ID_MEMORY", default: "\(defaults.engine.seenIdMemoryMs / 60_000)m",
        check: { text in
            guard let ms = Self.duration(text), ms >= 1_000, ms <= defaults.engine.seenIdRetentionMs else {
                return "must be a number and s, m or h, from 1s to 48h (5m)"
            }
            return nil
        })

    /// Flags, then environment variables, then defaults. A bad value in either place is a
    /// usage error (exit 64) naming the flag or the variable.
    func resolve(environment env: [String: String]) throws -> Settings {
        var c = CoordinatorConfiguration()
        let address = try broker.resolve(in: env)
        (c.host, c.port, c.tls, c.engine.topicRoot) = (address.host, address.port, address.tls, address.topicRoot)
        (c.username, c.password) = try account.resolve(in: env)
        c.brokerAdminUsername = try Self.brokerAdminUsername.resolve(brokerAdminUsername, in: env)
        if let path = try Self.brokerAdminPasswordFile.resolve(brokerAdminPasswordFile, in: env) {
            guard c.brokerAdminUsername != nil else { throw ValidationError("--broker-admin-password-file needs --broker-admin-username") }
            c.brokerAdminPassword = try usageError { () throws(MQTTError) in try MQTTPasswordFile.read(path) }
        }
        c.clientId = try Self.clientId.value(clientId, in: env)
        c.databasePath = try Self.database.value(database, in: env)
        let location: StoreLocation
        do {
            location = try StoreLocation(c.databasePath)
        } catch {
            throw ValidationError("--database: \(error.reason)")
        }
        if case .postgres = location, !StoreLocation.postgresBuiltIn {
            throw ValidationError("--database: \(StoreLocation.noPostgresInThisBuild)")
        }
        let lease = try Self.leaderLeaseSeconds.value(leaderLeaseSeconds, in: env)
        guard lease >= 0.2 else { throw ValidationError("--leader-lease-seconds must be at least 0.2, not \(lease)") }
        c.leaderLeaseMs = Millis((lease * 1000).rounded())
        let silence = try Self.brokerSilenceSeconds.value(brokerSilenceSeconds, in: env)
        guard silence >= 0.5 else { throw ValidationError("--broker-silence-seconds must be at least 0.5, not \(silence)") }
        c.brokerSilenceMs = Millis((silence * 1000).rounded())
        if let v = try Self.instanceId.resolve(instanceId, in: env) { c.instanceId = v }
        c.engine.partitioning = Partitioning(count: try Self.partitions.value(partitions, in: env))!
        c.engine.reorderWindowMs = Millis(try Self.reorderWindowMs.value(reorderWindowMs, in: env))
        c.engine.maxSkewMs = Millis(try Self.maxSkewMs.value(maxSkewMs, in: env))
        c.turnSpacing = .microseconds(try Self.turnSpacingUs.value(turnSpacingUs, in: env))
        c.engine.lockLeaseMs = Millis((try Self.lockLeaseSeconds.value(lockLeaseSeconds, in: env) * 1000).rounded())
        c.engine.presenceGraceMs = Millis((try Self.presenceGraceSeconds.value(presenceGraceSeconds, in: env) * 1000).rounded())
        c.engine.rateLimitPerSecond = try Self.rateLimit.value(rateLimit, in: env)
        c.engine.rateLimitBurst = try Self.rateLimitBurst.value(rateLimitBurst, in: env)
        c.engine.maxStickersPerRoom = try Self.maxStickersPerRoom.value(maxStickersPerRoom, in: env)
        c.engine.maxRoomMembers = try Self.maxRoomMembers.value(maxRoomMembers, in: env)
        c.engine.maxConversationsPerUser = try Self.maxConversationsPerUser.value(maxConversationsPerUser, in: env)
        c.engine.conversationSnapshotIntervalMs = Millis((try Self.conversationSnapshotSeconds.value(conversationSnapshotSeconds, in: env) * 1000).rounded())
        let retention = Self.duration(try Self.eventLogRetention.value(eventLogRetention, in: env)) ?? 0
        c.engine.eventLogRetentionMs = retention == 0 ? nil : retention
        c.engine.seenIdMemoryMs = Self.duration(try Self.idMemory.value(idMemory, in: env)) ?? c.engine.seenIdMemoryMs
        let (level, format) = try logging.resolve(in: env)
        return Settings(
            configuration: c, level: level, format: format,
            metricsHost: try Self.metricsHost.value(metricsHost, in: env),
            metricsPort: try Self.metricsPort.value(metricsPort, in: env))
    }

    /// "90s", "15m", "36h", "7d" (fractions allowed) in milliseconds; "0": 0; nil when it
    /// is none of these, negative, or over ten years.
    static func duration(_ text: String) -> Millis? {
        if text == "0" { return 0 }
        let units: [Character: Double] = ["s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000]
        guard let unit = text.last.flatMap({ units[$0] }), let number = Double(text.dropLast()),
              number.isFinite, number > 0, number * unit <= 10 * 365 * 86_400_000 else { return nil }
        return max(1, Millis((number * unit).rounded()))
    }

    /// What the flags and variables say: the service's configuration, and what the
    /// executable itself sets up around it (logging, the metrics endpoint).
    struct Settings: Sendable {
        var configuration: CoordinatorConfiguration
        var level: Logger.Level
        var format: LogFormat
        var metricsHost: String
        var metricsPort: Int
    }
}
