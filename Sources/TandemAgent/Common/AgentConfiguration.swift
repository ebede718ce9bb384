import TandemMQTT
import TandemCore

/// What every agent mode needs to know: where the broker is, who it acts as, and how to
/// print. Built by the executable from its flags and environment.
public struct AgentConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?
    /// TLS to the broker; nil: plain TCP.
    public var tls: MQTTTLS?
    /// How long the first connection may take before the agent gives up with "cannot
    /// reach the broker" (scripted runs and one-shot commands); nil: keep trying, saying
    /// so once, as an interactive session does.
    public var connectTimeout: Duration?
    public var topics: Topics
    /// The userId the agent acts as (the `{userId}` level of every topic it publishes).
    public var user: String
    /// One JSON object per line on stdout instead of human output.
    public var json: Bool
    /// The least time between two flight samples published (a workout's origin device).
    public var flightInterval: Millis

    public init(host: String = "127.0.0.1", port: Int = 1883, username: String? = nil, password: String? = nil,
                topicRoot: String = Topics.defaultRoot, user: String, json: Bool = false, tls: MQTTTLS? = nil,
                connectTimeout: Duration? = .seconds(10), flightInterval: Millis = 3_000) {
        self.flightInterval = flightInterval
        self.tls = tls
        self.connectTimeout = connectTimeout
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.topics = Topics(root: topicRoot)
        self.user = user
        self.json = json
    }
}

/// A failure that ends an agent with a message for the person running it.
public struct AgentError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The exit code of an agent that read its commands from stdin.
public enum AgentExit {
    /// 64 (EX_USAGE) when any input line could not be understood, as for a bad flag:
    /// a script with a typo must not pass for a good one; else 1 when anything was
    /// rejected or never answered; else 0.
    public static func code(badLines: Int, rejected: Int, abandoned: Int) -> Int32 {
        if badLines > 0 { return 64 }
        return rejected == 0 && abandoned == 0 ? 0 : 1
    }
}
