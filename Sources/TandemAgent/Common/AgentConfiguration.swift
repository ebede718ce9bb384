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
    public var topics: Topics
    /// The userId the agent acts as (the `{userId}` level of every topic it publishes).
    public var user: String
    /// One JSON object per line on stdout instead of human output.
    public var json: Bool

    public init(host: String = "127.0.0.1", port: Int = 1883, username: String? = nil, password: String? = nil,
                topicRoot: String = Topics.defaultRoot, user: String, json: Bool = false, tls: MQTTTLS? = nil) {
        self.tls = tls
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
