import Logging
import TandemMQTT

extension TandemClient {
    /// A client over libmosquitto (``MosquittoTransport``), the user and client id given
    /// once: what most apps on Linux want.
    ///
    /// ```swift
    /// let client = try TandemClient(host: "127.0.0.1", port: 1883, username: "alice",
    ///                               password: "alice-demo", clientId: "alice-phone")
    /// ```
    ///
    /// - Parameters:
    ///   - user: the userId the client acts as; nil: the username.
    ///   - tls: nil connects in clear; otherwise the broker's certificate and host name
    ///     are verified against its CA file.
    /// - Throws: ``TandemClientError/connectFailed(reason:)`` when neither a user nor a
    ///   username is given; an `MQTTError` when libmosquitto refuses the settings.
    public init(
        host: String = "127.0.0.1", port: Int = 1883, username: String? = nil, password: String? = nil,
        tls: MQTTTLS? = nil, user: String? = nil, clientId: String, topics: Topics = Topics(),
        resendAfter: Millis = 5_000, flightInterval: Millis = 3_000, logger: Logger = Logger(label: "tandem.client")
    ) throws {
        guard let user = user ?? username else {
            throw TandemClientError.connectFailed(reason: "a TandemClient needs a user (or a username to act as)")
        }
        let transport = try MosquittoTransport(
            host: host, port: port, username: username, password: password, tls: tls,
            user: user, clientId: clientId, topics: topics, logger: logger)
        self.init(transport: transport, user: user, clientId: clientId, topics: topics,
                  resendAfter: resendAfter, flightInterval: flightInterval, logger: logger)
    }
}
