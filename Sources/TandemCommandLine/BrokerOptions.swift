import ArgumentParser
import TandemCore
import TandemMQTT

/// Where the broker is and how to reach it: the flags that every Tandem binary takes
/// (`@OptionGroup var broker: BrokerOptions`), declared here once.
public struct BrokerOptions: ParsableArguments, Sendable {
    public static let host = Setting<String>.text("host", "TANDEM_MQTT_HOST", default: "127.0.0.1", check: {
        $0.isEmpty ? "must not be empty" : nil
    })
    public static let port = Setting<Int>.integer("port", "TANDEM_MQTT_PORT", default: 1883, range: 1...65535)
    public static let tlsCaFile = Setting<String>.text("tls-ca-file", "TANDEM_MQTT_CA_FILE")
    public static let tlsCertFile = Setting<String>.text("tls-cert-file", "TANDEM_MQTT_CERT_FILE")
    public static let tlsKeyFile = Setting<String>.text("tls-key-file", "TANDEM_MQTT_KEY_FILE")
    public static let topicRoot = Setting<String>.text("topic-root", "TANDEM_TOPIC_ROOT", default: Topics.defaultRoot, check: {
        $0.isEmpty || $0.hasSuffix("/") || $0.contains("+") || $0.contains("#")
            ? "must be a topic without wildcards or a trailing /" : nil
    })

    @Option(help: BrokerOptions.host.help("MQTT broker host"))
    public var host: String?

    @Option(help: BrokerOptions.port.help("MQTT broker port"))
    public var port: Int?

    @Option(help: BrokerOptions.tlsCaFile.help("Connect with TLS, verifying the broker's certificate and host name against this CA file", valueName: "path"))
    public var tlsCaFile: String?

    @Option(help: BrokerOptions.tlsCertFile.help("Client certificate for TLS", valueName: "path"))
    public var tlsCertFile: String?

    @Option(help: BrokerOptions.tlsKeyFile.help("Client certificate's private key", valueName: "path"))
    public var tlsKeyFile: String?

    @Option(help: BrokerOptions.topicRoot.help("Topic root"))
    public var topicRoot: String?

    public init() {}

    /// The address, TLS and topic root; a bad value or an unreadable file is a usage
    /// error naming the flag or the variable.
    public func resolve(in environment: [String: String]) throws -> BrokerAddress {
        let settings = MQTTSecuritySettings(
            password: nil, passwordFile: nil,
            caFile: try Self.tlsCaFile.resolve(tlsCaFile, in: environment),
            certFile: try Self.tlsCertFile.resolve(tlsCertFile, in: environment),
            keyFile: try Self.tlsKeyFile.resolve(tlsKeyFile, in: environment))
        let tls = try usageError { () throws(MQTTError) in try settings.resolve().tls }
        return BrokerAddress(
            host: try Self.host.value(host, in: environment),
            port: try Self.port.value(port, in: environment),
            tls: tls,
            topicRoot: try Self.topicRoot.value(topicRoot, in: environment))
    }
}

/// What ``BrokerOptions`` resolve to.
public struct BrokerAddress: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var tls: MQTTTLS?
    public var topicRoot: String
}

/// The broker account a process connects as: a coordinator's, an agent's (a person's).
/// `tandem-web` has none of its own: each browser signs in as its person.
public struct BrokerAccountOptions: ParsableArguments, Sendable {
    public static let username = Setting<String>.text("username", "TANDEM_MQTT_USERNAME")
    public static let password = Setting<String>.text("password", "TANDEM_MQTT_PASSWORD")
    public static let passwordFile = Setting<String>.text("password-file", "TANDEM_MQTT_PASSWORD_FILE")

    @Option(help: BrokerAccountOptions.username.help("MQTT username; none connects anonymously"))
    public var username: String?

    @Option(help: BrokerAccountOptions.password.help("MQTT password; prefer --password-file, which no other user can read in the process list"))
    public var password: String?

    @Option(help: BrokerAccountOptions.passwordFile.help("Read the MQTT password from this file's first line", valueName: "path"))
    public var passwordFile: String?

    public init() {}

    /// The username and the password (a password file is read once per process: it may
    /// be a pipe, `<(echo ...)`).
    public func resolve(in environment: [String: String]) throws -> (username: String?, password: String?) {
        let settings = MQTTSecuritySettings(
            password: try Self.password.resolve(password, in: environment),
            passwordFile: try Self.passwordFile.resolve(passwordFile, in: environment),
            caFile: nil, certFile: nil, keyFile: nil)
        let password = try usageError { () throws(MQTTError) in try settings.resolve().password }
        return (try Self.username.resolve(username, in: environment), password)
    }
}

/// What `body` returns; an `MQTTError` (an unreadable file, flags that do not go
/// together) becomes a usage error with its message (exit 64).
public func usageError<T>(_ body: () throws(MQTTError) -> T) throws -> T {
    do {
        return try body()
    } catch {
        throw ValidationError(error.message)
    }
}
