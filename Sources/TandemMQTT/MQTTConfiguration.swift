#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CMosquitto
import Synchronization

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
    /// libmosquitto's queue. Each publish and each acknowledgement walks the messages in
    /// flight, so a large value costs CPU whenever the broker is slow to acknowledge.
    public var maxInflight: Int
    /// Incoming QoS 1 messages the broker may have in flight to us (v5 receive maximum).
    public var receiveMaximum: Int
    /// Reconnect backoff: first delay and the cap, in seconds (doubling in between).
    public var reconnectDelay: Double
    public var reconnectDelayMax: Double
    /// TLS to the broker; nil: plain TCP.
    public var tls: MQTTTLS?
    /// Asked before every connection attempt and every message handed to libmosquitto;
    /// once it says false the client cuts its connection without a DISCONNECT (so the
    /// broker publishes the will), never connects again, and refuses to publish. A
    /// coordinator's leader lease: a process that lost it must not speak for the shared
    /// client id. nil: always open.
    public var gate: (@Sendable () -> Bool)?

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
        reconnectDelayMax: Double = 10,
        tls: MQTTTLS? = nil,
        gate: (@Sendable () -> Bool)? = nil
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
        self.tls = tls
        self.gate = gate
    }
}

/// TLS to the broker: its certificate is verified against `caFile`, host name included
/// (never turned off); `certFile` and `keyFile` add a client certificate.
public struct MQTTTLS: Sendable, Equatable {
    public var caFile: String
    public var certFile: String?
    public var keyFile: String?

    public init(caFile: String, certFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
    }
}

/// Reading a password from a file (`--password-file`), so that it never stands on a
/// command line where every local user can read it in the process list.
public enum MQTTPasswordFile {
    /// The file's first line, without its line ending. An empty or unreadable file is an
    /// error naming the file.
    ///
    /// Read once per process and path: a second call (a command's validation, then its
    /// run) gets what the first read, for the file may be a pipe (`<(echo ...)`) that a
    /// second read finds empty.
    public static func read(_ path: String) throws(MQTTError) -> String {
        if let known = remembered.withLock({ $0[path] }) { return known }
        let password = try readFile(path)
        remembered.withLock { $0[path] = password }
        return password
    }

    private static let remembered = Mutex<[String: String]>([:])

    private static func readFile(_ path: String) throws(MQTTError) -> String {
        guard let file = fopen(path, "r") else {
            throw MQTTError(.library(code: MOSQ_ERR_INVAL.rawValue), "cannot read the password file \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        while true {
            let c = getc(file)
            if c == EOF || c == 0x0A { break }
            bytes.append(UInt8(truncatingIfNeeded: c))
        }
        if bytes.last == 0x0D { bytes.removeLast() }
        guard !bytes.isEmpty else {
            throw MQTTError(.library(code: MOSQ_ERR_INVAL.rawValue), "the password file \(path) is empty")
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The message the broker publishes for us if we vanish without a DISCONNECT.
public struct MQTTWill: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool
    /// MQTT v5 message expiry: the broker drops the message (a retained copy included)
    /// this many seconds after it publishes it; nil: never.
    public var messageExpirySeconds: UInt32?

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = true, messageExpirySeconds: UInt32? = nil) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.messageExpirySeconds = messageExpirySeconds
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

/// The secret and TLS settings as a command line gives them (each already merged from
/// its flag and environment variable), checked together: both a password and a
/// password file, a certificate without its key, or a file that cannot be read is an
/// error naming the flag. The binaries turn it into a usage error (exit 64).
public struct MQTTSecuritySettings: Sendable {
    public var password: String?
    public var passwordFile: String?
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?

    public init(password: String?, passwordFile: String?, caFile: String?, certFile: String?, keyFile: String?) {
        self.password = password
        self.passwordFile = passwordFile
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
    }

    /// The password to use (read from the file when one is named) and the TLS settings.
    public func resolve() throws(MQTTError) -> (password: String?, tls: MQTTTLS?) {
        func fail(_ message: String) -> MQTTError { MQTTError(.library(code: MOSQ_ERR_INVAL.rawValue), message) }
        if password != nil, passwordFile != nil {
            throw fail("--password and --password-file (TANDEM_MQTT_PASSWORD, TANDEM_MQTT_PASSWORD_FILE) cannot both be given: use one")
        }
        let resolvedPassword = try passwordFile.map { (path) throws(MQTTError) in try MQTTPasswordFile.read(path) } ?? password
        for (flag, path) in [("--tls-ca-file", caFile), ("--tls-cert-file", certFile), ("--tls-key-file", keyFile)] {
            if let path, access(path, R_OK) != 0 {
                throw fail("\(flag): cannot read \(path): \(String(cString: strerror(errno)))")
            }
        }
        if (certFile == nil) != (keyFile == nil) {
            throw fail("--tls-cert-file and --tls-key-file go together: give both or neither")
        }
        guard let caFile else {
            if certFile != nil { throw fail("--tls-cert-file needs --tls-ca-file: TLS is turned on by the CA file") }
            return (resolvedPassword, nil)
        }
        return (resolvedPassword, MQTTTLS(caFile: caFile, certFile: certFile, keyFile: keyFile))
    }
}
