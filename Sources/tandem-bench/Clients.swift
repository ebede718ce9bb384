import Logging
import TandemCore
import TandemMQTT

/// Where the broker is and how the bench's clients connect to it.
struct BrokerAddress: Sendable {
    var host: String
    var port: Int
    var username: String?
    var password: String?
    /// `--as USER:PASSWORD`: the identities clients take in turn (client c is
    /// identities[c % count]), so the bench runs against a broker with the shipped ACL,
    /// where a client may only speak as its own MQTT username.
    var identities: [Identity] = []

    struct Identity: Sendable {
        var user: String
        var password: String
    }

    /// The userId client `c` acts as: its identity, or the scenario's own name for it.
    func user(_ c: Int, otherwise name: String) -> String {
        identities.isEmpty ? name : identities[c % identities.count].user
    }

    /// The credentials client `c` connects with.
    func credentials(_ c: Int) -> (username: String?, password: String?) {
        identities.isEmpty ? (username, password) : (identities[c % identities.count].user, identities[c % identities.count].password)
    }
}

/// One MQTT connection of the bench: publishes events and hears what comes back on
/// its own filters, handing each message to `onMessage` on a task of its own.
final class BenchClient: Sendable {
    let mqtt: MQTTClient
    let listener: Task<Void, Never>

    static let quietLogger: Logger = {
        var logger = Logger(label: "tandem-bench.mqtt")
        logger.logLevel = .error
        return logger
    }()

    init(broker: BrokerAddress, as identity: Int = 0, clientId: String, filters: [String], onMessage: @escaping @Sendable (MQTTMessage, UInt64) -> Void) async throws {
        let credentials = broker.credentials(identity)
        mqtt = try MQTTClient(
            configuration: MQTTConfiguration(
                host: broker.host, port: broker.port, clientId: clientId,
                username: credentials.username, password: credentials.password,
                session: .cleanStart, maxInflight: 20_000, receiveMaximum: 20_000),
            logger: Self.quietLogger)
        if filters.isEmpty {
            listener = Task {}
        } else {
            // Subscribed before CONNECT, so nothing is missed.
            let subscription = try await mqtt.subscribe(filters, qos: .atLeastOnce)
            listener = Task {
                do {
                    for try await message in subscription { onMessage(message, monotonicNanos()) }
                } catch {}
            }
        }
        try await mqtt.connect()
    }

    /// Fire and forget, QoS 1 (libmosquitto retries it).
    func send(_ topic: String, _ payload: [UInt8]) {
        do {
            try mqtt.enqueue(topic, payload: payload, qos: .atLeastOnce)
        } catch {
            FileHandleOutput.warn("publish to \(topic) failed: \(error)")
        }
    }

    func close() async {
        await mqtt.disconnect()
        listener.cancel()
    }

    /// Connects `count` clients a few at a time.
    static func connectAll(_ count: Int, make: @escaping @Sendable (Int) async throws -> BenchClient) async throws -> [BenchClient] {
        var out: [BenchClient?] = Array(repeating: nil, count: count)
        var next = 0
        while next < count {
            let chunk = next..<min(count, next + 32)
            try await withThrowingTaskGroup(of: (Int, BenchClient).self) { group in
                for i in chunk { group.addTask { (i, try await make(i)) } }
                for try await (i, c) in group { out[i] = c }
            }
            next = chunk.upperBound
        }
        return out.map { $0! }
    }
}

/// Receipts on a client's `users/{user}/receipts`, into the tracker.
func receiptHandler(_ tracker: Tracker) -> @Sendable (MQTTMessage, UInt64) -> Void {
    { message, at in
        tracker.delivered(bytes: message.topic.utf8.count + message.payload.count)
        if message.topic.hasSuffix("/changes") {
            return
        } else if message.topic.hasSuffix("/receipts") {
            if let r = WireScan.receipt(message.payload) {
                tracker.answered(id: r.id, status: r.status, code: r.code, version: r.version, at: at)
            }
        } else if let version = WireScan.version(in: message.payload) {
            tracker.snapshot(target: message.topic, version: version, bytes: message.payload.count, at: at)
        }
    }
}
