import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import TandemCoordinator
import TandemCore
import TandemLogging
import TandemMQTT
import Synchronization

@main
struct TandemCoordinatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tandem-coordinator",
        abstract: "The authoritative Tandem coordinator: orders, judges and publishes shared state over MQTT.",
        discussion: "Every option can also be set with the environment variable in brackets; a flag wins over the variable.",
        version: TandemVersion.current
    )

    @Option(help: "MQTT broker host [TANDEM_MQTT_HOST] (default 127.0.0.1)")
    var host: String?

    @Option(help: "MQTT broker port [TANDEM_MQTT_PORT] (default 1883)")
    var port: Int?

    @Option(help: "MQTT username [TANDEM_MQTT_USERNAME]; none connects anonymously")
    var username: String?

    @Option(help: "MQTT password [TANDEM_MQTT_PASSWORD]; prefer --password-file, which no other user can read in the process list")
    var password: String?

    @Option(help: ArgumentHelp("Read the MQTT password from this file's first line [TANDEM_MQTT_PASSWORD_FILE]", valueName: "path"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("The broker account that administers room access through mosquitto's dynamic-security plugin [TANDEM_BROKER_ADMIN_USERNAME]; without it the broker does not restrict who reads a room", valueName: "name"))
    var brokerAdminUsername: String?

    @Option(help: ArgumentHelp("Read the broker admin account's password from this file's first line [TANDEM_BROKER_ADMIN_PASSWORD_FILE]", valueName: "path"))
    var brokerAdminPasswordFile: String?

    @Option(help: ArgumentHelp("Connect with TLS, verifying the broker's certificate and host name against this CA file [TANDEM_MQTT_CA_FILE]", valueName: "path"))
    var tlsCaFile: String?

    @Option(help: ArgumentHelp("Client certificate for TLS [TANDEM_MQTT_CERT_FILE]", valueName: "path"))
    var tlsCertFile: String?

    @Option(help: ArgumentHelp("Client certificate's private key [TANDEM_MQTT_KEY_FILE]", valueName: "path"))
    var tlsKeyFile: String?

    @Option(help: "SQLite database file, or postgres://user:password@host:port/dbname [TANDEM_DATABASE] (default ./data/tandem.sqlite)")
    var database: String?

    @Option(help: "PostgreSQL: a leader not renewing its lease for this many seconds is replaced by a standby [TANDEM_LEADER_LEASE_SECONDS] (default 5)")
    var leaderLeaseSeconds: Double?

    @Option(help: "Names this process on coordinator/instances/{id} and in the lease [TANDEM_INSTANCE_ID] (default: host name and process id)")
    var instanceId: String?

    @Option(help: "Topic root [TANDEM_TOPIC_ROOT] (default tandem/v1)")
    var topicRoot: String?

    @Option(help: "Reorder window in milliseconds [TANDEM_REORDER_WINDOW_MS] (default 30)")
    var reorderWindowMs: Int?

    @Option(help: "Allowed clock skew in milliseconds [TANDEM_MAX_SKEW_MS] (default 2000)")
    var maxSkewMs: Int?

    @Option(help: "Lock lease in seconds, fractions allowed [TANDEM_LOCK_LEASE_SECONDS] (default 30)")
    var lockLeaseSeconds: Double?

    @Option(help: "Grace after an owner goes offline, in seconds [TANDEM_PRESENCE_GRACE_SECONDS] (default 5)")
    var presenceGraceSeconds: Double?

    @Option(help: "trace, debug, info, notice, warning, error or critical [TANDEM_LOG_LEVEL] (default info)")
    var logLevel: String?

    @Option(help: ArgumentHelp("text, or json: one JSON object per line on stderr [TANDEM_LOG_FORMAT] (default text)", valueName: "format"))
    var logFormat: String?

    @Option(help: "MQTT client id [TANDEM_CLIENT_ID] (default tandem-coordinator)")
    var clientId: String?

    @Option(help: "Serve GET /metrics (Prometheus) and /healthz over HTTP on this port, 0 for off [TANDEM_METRICS_PORT] (default 0)")
    var metricsPort: Int?

    @Option(help: "Address the metrics port listens on [TANDEM_METRICS_HOST] (default 127.0.0.1)")
    var metricsHost: String?

    @Option(help: "Events a user may send per second, 0 for no limit [TANDEM_RATE_LIMIT] (default 200)")
    var rateLimit: Double?

    @Option(help: "Events a user may send at once after a quiet spell [TANDEM_RATE_LIMIT_BURST] (default 400)")
    var rateLimitBurst: Double?

    @Option(help: "Live stickers a room may hold [TANDEM_MAX_STICKERS_PER_ROOM] (default 1000)")
    var maxStickersPerRoom: Int?

    @Option(help: "Members a room may have, owner included [TANDEM_MAX_ROOM_MEMBERS] (default 8)")
    var maxRoomMembers: Int?

    @Option(help: "Conversations a user may be part of [TANDEM_MAX_CONVERSATIONS_PER_USER] (default 1000)")
    var maxConversationsPerUser: Int?

    @Option(help: ArgumentHelp("How long the event log keeps each processed event: a number and s, m, h or d (36h, 7d), or 0 to keep it for ever [TANDEM_EVENT_LOG_RETENTION] (default 7d)", valueName: "duration"))
    var eventLogRetention: String?

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
        Self.resolved.withLock { $0 = nil }
        let settings = try resolve(environment: ProcessInfo.processInfo.environment)
        Self.resolved.withLock { $0 = settings }
    }

    /// What ``validate()`` resolved, for ``run()``: a secret is read once (a password
    /// file may be a pipe, `<(echo ...)`, which a second read finds empty).
    static let resolved = Mutex<Settings?>(nil)

    func run() async throws {
        let settings = try Self.resolved.withLock { $0 } ?? resolve(environment: ProcessInfo.processInfo.environment)
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
        let factory = MetricsExporter.prometheusFactory(registry: registry)
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

    /// Flags, then environment variables, then defaults. A bad value in either place is a
    /// usage error (exit 64) naming the flag or the variable.
    func resolve(environment env: [String: String]) throws -> Settings {
        var c = CoordinatorConfiguration()
        func text(_ flag: String?, _ variable: String) -> String? {
            if let flag { return flag }
            if let value = env[variable], !value.isEmpty { return value }
            return nil
        }
        func integer(_ flag: Int?, _ name: String, _ variable: String, range: ClosedRange<Int>) throws -> Int? {
            let value: Int
            if let flag {
                value = flag
            } else if let raw = env[variable], !raw.isEmpty {
                guard let parsed = Int(raw) else { throw ValidationError("\(variable)=\(raw) is not an integer") }
                value = parsed
            } else {
                return nil
            }
            guard range.contains(value) else {
                throw ValidationError("--\(name) must be between \(range.lowerBound) and \(range.upperBound), not \(value)")
            }
            return value
        }
        func seconds(_ flag: Double?, _ name: String, _ variable: String) throws -> Millis? {
            let value: Double
            if let flag {
                value = flag
            } else if let raw = env[variable], !raw.isEmpty {
                guard let parsed = Double(raw) else { throw ValidationError("\(variable)=\(raw) is not a number of seconds") }
                value = parsed
            } else {
                return nil
            }
            guard value.isFinite, value > 0, value <= 86_400 * 365 else {
                throw ValidationError("--\(name) must be a positive number of seconds, not \(value)")
            }
            return Millis((value * 1000).rounded())
        }

        func number(_ flag: Double?, _ name: String, _ variable: String, allowZero: Bool) throws -> Double? {
            let value: Double
            if let flag {
                value = flag
            } else if let raw = env[variable], !raw.isEmpty {
                guard let parsed = Double(raw) else { throw ValidationError("\(variable)=\(raw) is not a number") }
                value = parsed
            } else {
                return nil
            }
            guard value.isFinite, allowZero ? value >= 0 : value > 0 else {
                throw ValidationError("--\(name) must be a \(allowZero ? "non-negative" : "positive") number, not \(value)")
            }
            return value
        }

        if let v = text(host, "TANDEM_MQTT_HOST") { c.host = v }
        if let v = try integer(port, "port", "TANDEM_MQTT_PORT", range: 1...65535) { c.port = v }
        c.username = text(username, "TANDEM_MQTT_USERNAME")
        do {
            (c.password, c.tls) = try MQTTSecuritySettings(
                password: text(password, "TANDEM_MQTT_PASSWORD"),
                passwordFile: text(passwordFile, "TANDEM_MQTT_PASSWORD_FILE"),
                caFile: text(tlsCaFile, "TANDEM_MQTT_CA_FILE"),
                certFile: text(tlsCertFile, "TANDEM_MQTT_CERT_FILE"),
                keyFile: text(tlsKeyFile, "TANDEM_MQTT_KEY_FILE")
            ).resolve()
        } catch {
            throw ValidationError(error.message)
        }
        c.brokerAdminUsername = text(brokerAdminUsername, "TANDEM_BROKER_ADMIN_USERNAME")
        if let path = text(brokerAdminPasswordFile, "TANDEM_BROKER_ADMIN_PASSWORD_FILE") {
            guard c.brokerAdminUsername != nil else { throw ValidationError("--broker-admin-password-file needs --broker-admin-username") }
            do {
                c.brokerAdminPassword = try MQTTPasswordFile.read(path)
            } catch {
                throw ValidationError(error.message)
            }
        }
        if let v = text(database, "TANDEM_DATABASE") {
            do {
                _ = try StoreLocation(v)
            } catch {
                throw ValidationError("--database: \(error.reason)")
            }
            c.databasePath = v
        }
        if let v = try seconds(leaderLeaseSeconds, "leader-lease-seconds", "TANDEM_LEADER_LEASE_SECONDS") {
            guard v >= 200 else { throw ValidationError("--leader-lease-seconds must be at least 0.2, not \(Double(v) / 1000)") }
            c.leaderLeaseMs = v
        }
        if let v = text(instanceId, "TANDEM_INSTANCE_ID") {
            guard Identifier.isValid(v) else {
                throw ValidationError("--instance-id must be 1-64 characters of A-Z a-z 0-9 _ . -, not \(v)")
            }
            c.instanceId = v
        }
        if let v = text(topicRoot, "TANDEM_TOPIC_ROOT") {
            guard !v.isEmpty, !v.hasSuffix("/"), !v.contains("+"), !v.contains("#") else {
                throw ValidationError("--topic-root must be a topic without wildcards or a trailing /, not \(v)")
            }
            c.topicRoot = v
        }
        if let v = try integer(reorderWindowMs, "reorder-window-ms", "TANDEM_REORDER_WINDOW_MS", range: 0...60_000) { c.reorderWindowMs = Millis(v) }
        if let v = try integer(maxSkewMs, "max-skew-ms", "TANDEM_MAX_SKEW_MS", range: 0...86_400_000) { c.maxSkewMs = Millis(v) }
        if let v = try seconds(lockLeaseSeconds, "lock-lease-seconds", "TANDEM_LOCK_LEASE_SECONDS") { c.lockLeaseMs = v }
        if let v = try seconds(presenceGraceSeconds, "presence-grace-seconds", "TANDEM_PRESENCE_GRACE_SECONDS") { c.presenceGraceMs = v }
        if let v = try number(rateLimit, "rate-limit", "TANDEM_RATE_LIMIT", allowZero: true) { c.rateLimitPerSecond = v }
        if let v = try number(rateLimitBurst, "rate-limit-burst", "TANDEM_RATE_LIMIT_BURST", allowZero: false) { c.rateLimitBurst = v }
        if let v = try integer(maxStickersPerRoom, "max-stickers-per-room", "TANDEM_MAX_STICKERS_PER_ROOM", range: 1...1_000_000) { c.maxStickersPerRoom = v }
        if let v = try integer(maxRoomMembers, "max-room-members", "TANDEM_MAX_ROOM_MEMBERS", range: 1...10_000) { c.maxRoomMembers = v }
        if let v = try integer(maxConversationsPerUser, "max-conversations-per-user", "TANDEM_MAX_CONVERSATIONS_PER_USER", range: 1...1_000_000) { c.maxConversationsPerUser = v }
        if let v = text(eventLogRetention, "TANDEM_EVENT_LOG_RETENTION") {
            guard let ms = Self.duration(v) else {
                throw ValidationError("--event-log-retention must be a number and s, m, h or d (7d), or 0 for ever; not \(v)")
            }
            c.eventLogRetentionMs = ms == 0 ? nil : ms
        }
        if let v = text(clientId, "TANDEM_CLIENT_ID") {
            guard !v.isEmpty, v.utf8.count <= 65535 else { throw ValidationError("--client-id must not be empty") }
            c.clientId = v
        }
        let levelText = text(logLevel, "TANDEM_LOG_LEVEL") ?? "info"
        guard let level = Logger.Level(rawValue: levelText.lowercased()) else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical; not \(levelText)")
        }
        let formatText = text(logFormat, "TANDEM_LOG_FORMAT") ?? "text"
        guard let format = LogFormat(rawValue: formatText.lowercased()) else {
            throw ValidationError("--log-format must be text or json, not \(formatText)")
        }
        let port = try integer(metricsPort, "metrics-port", "TANDEM_METRICS_PORT", range: 0...65535) ?? 0
        let host = text(metricsHost, "TANDEM_METRICS_HOST") ?? "127.0.0.1"
        guard !host.isEmpty else { throw ValidationError("--metrics-host must not be empty") }
        return Settings(configuration: c, level: level, format: format, metricsHost: host, metricsPort: port)
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
