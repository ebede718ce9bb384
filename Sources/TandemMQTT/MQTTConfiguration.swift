/// How to reach the broker and what kind of session to keep.
public struct MQTTConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var clientId: String
    public var username: String?
    public var password: String?
    /// Seconds between keepalive pings.
    public var keepAlive: Int
    public var will: MQTTWill?
    public var session: Session
    /// Outgoing QoS 1 messages in flight at once (MQTT v5 send maximum); more wait in
    /// libmosquitto's queue.
    public var maxInflight: Int
    /// Incoming QoS 1 messages the broker may have in flight to us (v5 receive maximum).
    public var receiveMaximum: Int
    /// Reconnect backoff: first delay and the cap, in seconds (doubling in between).
    public var reconnectDelay: Double
    public var reconnectDelayMax: Double

    public enum Session: Sendable, Equatable {
        /// A new session on every connect; nothing kept by the broker.
        case cleanStart
        /// The broker keeps the session (subscriptions, queued QoS 1 messages) for this
        /// many seconds after a disconnect. Under MQTT v5 `clean_start=false` alone
        /// drops the session at disconnect: the expiry interval is what keeps it.
        case persistent(expirySeconds: UInt32)
    }

    public init(
        host: String = "127.0.0.1",
        port: Int = 1883,
        clientId: String,
        username: String? = nil,
        password: String? = nil,
        keepAlive: Int = 30,
        will: MQTTWill? = nil,
        session: Session = .cleanStart,
        maxInflight: Int = 1000,
        receiveMaximum: Int = 1000,
        reconnectDelay: Double = 0.25,
        reconnectDelayMax: Double = 10
    ) {
        self.host = host
        self.port = port
        self.clientId = clientId
        self.username = username
        self.password = password
        self.keepAlive = keepAlive
        self.will = will
        self.session = session
        self.maxInflight = maxInflight
        self.receiveMaximum = receiveMaximum
        self.reconnectDelay = reconnectDelay
        self.reconnectDelayMax = reconnectDelayMax
    }
}

/// The message the broker publishes for us if we vanish without a DISCONNECT.
public struct MQTTWill: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = true) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}

public enum MQTTQoS: Int32, Sendable {
    case atMostOnce = 0
    case atLeastOnce = 1
}

/// One message received, copied out of libmosquitto's buffers.
public struct MQTTMessage: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }

    public var payloadString: String { String(decoding: payload, as: UTF8.self) }
}

/// What happens to the connection, for callers that need to react (republish state,
/// resend unacknowledged work).
public enum MQTTConnectionEvent: Sendable, Equatable {
    /// Connected and every subscription acknowledged. `sessionPresent`: the broker kept
    /// our session from before.
    case connected(sessionPresent: Bool)
    /// The connection dropped (or an attempt failed); the client retries after a backoff.
    case disconnected(reason: String)
}
