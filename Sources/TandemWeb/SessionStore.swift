import Logging
import ServiceLifecycle
import TandemClient
import TandemCore
import TandemMQTT

/// Where the web server's broker is, and how sessions behave.
public struct WebSettings: Sendable {
    public var brokerHost: String
    public var brokerPort: Int
    public var tls: MQTTTLS?
    public var topicRoot: String
    /// How long a session lives with no tab open (a reload fits in it).
    public var tabGrace: Duration
    /// Frames a session may send a second, and how many may come at once, before the
    /// next ones wait.
    public var framesPerSecond: Double
    public var frameBurst: Double
    /// How long a sign-in waits for the broker.
    public var connectTimeout: Duration
    /// The most tabs one session may have open; the next is refused (429).
    public var maxTabsPerSession: Int
    /// At load, the least time between two turns of the loop that drives every session's
    /// MQTT socket (``PollLoop/turnSpacing``): what arrives meanwhile is read in one wake.
    public var turnSpacing: Duration
    /// The most sessions at once; the next sign-in is refused (503) until one ends. Each
    /// session holds two open files (four with a libmosquitto other than 2.0), and a
    /// process out of them does not fail one sign-in but everything (libdispatch stops
    /// the process when it cannot open a file of /proc): tandem-web sets this from its
    /// open-file limit
    /// (``SessionStore/sessionLimit(openFiles:perConnection:)``).
    public var maxSessions: Int

    public init(
        brokerHost: String = "127.0.0.1", brokerPort: Int = 1883, tls: MQTTTLS? = nil, topicRoot: String = Topics.defaultRoot,
        tabGrace: Duration = .seconds(5), framesPerSecond: Double = 50, frameBurst: Double = 100,
        connectTimeout: Duration = .seconds(5), maxTabsPerSession: Int = 16, turnSpacing: Duration = .milliseconds(2),
        maxSessions: Int = .max
    ) {
        self.brokerHost = brokerHost
        self.brokerPort = brokerPort
        self.tls = tls
        self.topicRoot = topicRoot
        self.tabGrace = tabGrace
        self.framesPerSecond = framesPerSecond
        self.frameBurst = frameBurst
        self.connectTimeout = connectTimeout
        self.maxTabsPerSession = maxTabsPerSession
        self.turnSpacing = turnSpacing
        self.maxSessions = maxSessions
    }
}

/// Why a sign-in failed, said so that the person can act on it.
public enum SignInError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The broker refused the username and password.
    case refused(String)
    /// The broker was not reached in time.
    case unreachable(String)

    public var description: String {
        switch self {
        case .refused(let reason): reason
        case .unreachable(let reason): reason
        }
    }
}

/// The signed-in sessions, by the secret their cookie carries. A `Service`: on shutdown
/// every session ends (each person's presence says offline).
///
/// Every session keeps its own MQTT connection under its own broker account (the broker
/// decides what each person reads and writes), but none has a thread: one ``PollLoop``
/// reads and writes all their sockets, and an ``MQTTConnector`` of two threads connects
/// and reconnects them. The threads of the process do not grow with its sessions.
public actor SessionStore: Service {
    public nonisolated let settings: WebSettings
    public nonisolated let metrics: WebMetrics
    private let logger: Logger
    private var sessions: [String: WebSession] = [:]
    /// Sign-ins under way (they count against ``WebSettings/maxSessions`` too).
    private var signingIn = 0
    /// The loop that drives every session's MQTT socket, and the threads that connect them.
    nonisolated let loop: PollLoop
    nonisolated let connector: MQTTConnector
    /// The `room` frames, the room's part written once per version for every tab.
    nonisolated let roomFrames: RoomFrames
    /// A room's snapshots and changes decoded once for every session that shows it.
    nonisolated let decodes = SharedDecodes()

    public init(settings: WebSettings, metrics: WebMetrics = WebMetrics(), logger: Logger = Logger(label: "tandem.web")) throws {
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        // No gate to watch, and keepalives of a minute: each session is looked at once a
        // second, not ten times.
        loop = try PollLoop(name: "web-mqtt", turnSpacing: settings.turnSpacing, corksWrites: false, sweepInterval: .seconds(1))
        connector = MQTTConnector(name: "web-connect", threads: 2)
        roomFrames = RoomFrames(metrics: metrics)
    }

    /// The loop's and the connector's threads end (after every session has: ``run()``).
    private func stopThreads() {
        loop.stop()
        connector.stop()
    }

    /// Opens `username`'s own MQTT session with `password`; returns the web session.
    public func signIn(username: String, password: String) async throws(SignInError) -> WebSession {
        guard sessions.count + signingIn < settings.maxSessions else {
            logger.warning("sign-in of \(username) refused: \(sessions.count) sessions, the most this process takes")
            throw .unreachable("this server holds as many sessions as it can (\(settings.maxSessions)); try again later")
        }
        signingIn += 1
        defer { signingIn -= 1 }
        let token = Self.newToken()
        let clientId = "web-\(username.prefix(40))-\(token.prefix(8))"
        let client: TandemClient
        do {
            var clientLogger = logger
            clientLogger[metadataKey: "user"] = .string(username)
            let topics = Topics(root: settings.topicRoot)
            // What MosquittoTransport(host:...) sets up (the retained offline will, a clean
            // session), on the shared loop and connector: the loop's messages and the
            // connection's edges go straight into the client's inbox, with no task of the
            // session waiting on a stream. Subscribed at QoS 0 (`subscribingAt:` says why).
            let mqtt = try MQTTClient(
                configuration: MQTTConfiguration(
                    host: settings.brokerHost, port: settings.brokerPort, clientId: clientId, username: username, password: password,
                    will: MQTTWill(topic: topics.presence(user: username, clientId: clientId),
                                   payload: TandemClient.offline, qos: .atLeastOnce, retain: true),
                    session: .cleanStart, tls: settings.tls),
                loop: loop, connector: connector, logger: clientLogger)
            client = TandemClient(
                transport: MosquittoTransport(mqtt, subscribingAt: .atMostOnce), user: username, clientId: clientId, topics: topics, logger: clientLogger,
                sharedDecodes: decodes)
        } catch {
            throw .unreachable("the MQTT client could not be set up: \(error)")
        }
        let session = WebSession(
            token: token, user: username, client: client, roomFrames: roomFrames, tabGrace: settings.tabGrace,
            pacer: TokenBucket(ratePerSecond: settings.framesPerSecond, burst: settings.frameBurst, now: WallClock.now()), logger: logger)
        do {
            // Detached from the request: the tasks the session and its client start copy
            // the task-local values of the task that starts them, a slab of memory each
            // (about 8 KB a session); a detached task has none.
            let timeout = settings.connectTimeout
            try await Task.detached {
                try await session.start(timeout: timeout) { [weak self] ended in
                    await self?.forget(ended)
                }
            }.value
        } catch TandemClientError.connectFailed(let reason) where Self.refusedCredentials(reason) {
            logger.info("sign-in of \(username) refused: \(reason)")
            throw .refused(reason)
        } catch TandemClientError.connectFailed(let reason) {
            // Not the account: this server could not open the MQTT session (a TLS
            // failure, a socket libmosquitto will not take). Not "wrong password".
            logger.error("sign-in of \(username) failed: \(reason)")
            throw .unreachable("the MQTT session could not be opened: \(reason)")
        } catch TandemClientError.unreachable(let problem, _) {
            throw .unreachable("the broker at \(settings.brokerHost):\(settings.brokerPort) is not reachable\(problem.map { ": \($0)" } ?? "")")
        } catch {
            throw .unreachable("\(error)")
        }
        sessions[token] = session
        metrics.sessions.set(to: Double(sessions.count))
        logger.info("\(username) signed in (\(clientId)); \(sessions.count) session(s)")
        return session
    }

    /// The live session this cookie's secret belongs to.
    public func session(token: String?) -> WebSession? {
        guard let token else { return nil }
        return sessions[token]
    }

    /// Ends the session of this secret (if any); returns whether there was one.
    @discardableResult
    public func signOut(token: String?) async -> Bool {
        guard let token, let session = sessions.removeValue(forKey: token) else { return false }
        metrics.sessions.set(to: Double(sessions.count))
        logger.info("\(session.user) signed out")
        await session.end()
        return true
    }

    public var count: Int { sessions.count }

    private func forget(_ session: WebSession) {
        if sessions[session.token] === session { sessions[session.token] = nil }
        metrics.sessions.set(to: Double(sessions.count))
    }

    /// Ends every session.
    public func endAll() async {
        let all = sessions.values
        sessions.removeAll()
        metrics.sessions.set(to: 0)
        for session in all { await session.end() }
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await endAll()
        stopThreads()
    }

    /// The descriptors a signed-in session with one tab holds: its MQTT connection's
    /// (``MQTTClient/descriptorsPerConnection``: its socket, and libmosquitto's wake-up
    /// pair where it could not be closed) and the tab's WebSocket.
    public static var descriptorsPerSession: Int { MQTTClient.descriptorsPerConnection + 1 }

    /// The most sessions a process with `openFiles` descriptors can hold, at
    /// `perConnection` + 1 each (``descriptorsPerSession``), after a tenth and 256 are
    /// kept for more tabs, HTTP requests and the process itself.
    public static func sessionLimit(openFiles: Int, perConnection: Int = MQTTClient.descriptorsPerConnection) -> Int {
        max(1, (openFiles - 256) * 9 / 10 / (perConnection + 1))
    }

    /// Whether a connect failure is the broker turning the account away (TandemMQTT's
    /// words for CONNACK 0x86, 0x87, 0x8C) rather than anything else that ends it.
    static func refusedCredentials(_ reason: String) -> Bool {
        reason.contains("refused the credentials") || reason.contains("refused a connection without credentials")
    }

    /// 32 random bytes in hex: the system generator is a cryptographic one
    /// (getrandom on Linux).
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        var text = ""
        for _ in 0..<4 {
            let word = generator.next() as UInt64
            let hex = String(word, radix: 16)
            text += String(repeating: "0", count: 16 - hex.count) + hex
        }
        return text
    }
}
