import Synchronization
import TandemCore
import TandemMQTT

/// The broker's own two-hop QoS 1 path with no coordinator: each client publishes an
/// event-sized message on `bench/relay/{nonce}/in/{c}`; a relay client of the bench
/// subscribes to `in/+` and republishes every message on `out/{c}`, which the sender
/// is subscribed to. The relay hands messages from libmosquitto's thread through an
/// `AsyncStream` to one task that enqueues them, as the coordinator's pipeline does.
final class RelayScenario: Scenario {
    let name = "relay"
    let options: ScenarioOptions
    private(set) var clients: [BenchClient] = []
    private var relay: BenchClient?
    private var relayTask: Task<Void, Never>?
    private var target: Int32 = 0
    private var cursor = 0

    init(options: ScenarioOptions) {
        self.options = options
    }

    /// Open broker: a topic tree of its own. With `--as` identities (the shipped ACL) the
    /// two hops run over presence topics, the only ones where a user may publish and
    /// another may listen: `presence/{first}/bench-in-c` -> relay (as the second identity)
    /// -> `presence/{second}/bench-out-c`. The coordinator ignores payloads there that are
    /// not presence.
    var acl: Bool { !options.broker.identities.isEmpty }
    var inTopic: @Sendable (Int) -> String {
        let root = options.topics.root, nonce = options.nonce, first = options.broker.user(0, otherwise: "")
        if acl { return { "\(root)/presence/\(first)/bench-in-\(nonce)-\($0)" } }
        return { "bench/relay/\(nonce)/in/\($0)" }
    }
    var inFilter: String {
        acl ? "\(options.topics.root)/presence/\(options.broker.user(0, otherwise: ""))/+" : "bench/relay/\(options.nonce)/in/+"
    }
    var outTopic: @Sendable (Int) -> String {
        let root = options.topics.root, nonce = options.nonce, second = options.broker.user(1, otherwise: "")
        if acl { return { "\(root)/presence/\(second)/bench-out-\(nonce)-\($0)" } }
        return { "bench/relay/\(nonce)/out/\($0)" }
    }

    var shape: [String: Int] { ["clients": options.clients] }

    func connect(tracker: Tracker) async throws {
        target = tracker.target("relay")
        let (stream, feed) = AsyncStream.makeStream(of: MQTTMessage.self)
        let relay = try await BenchClient(broker: options.broker, as: 1, clientId: "bench-relay-\(options.nonce)", filters: [inFilter]) { message, _ in
            feed.yield(message)
        }
        self.relay = relay
        let outTopic = self.outTopic
        relayTask = Task {
            for await message in stream {
                // The client's number ends the topic: ".../in/7" or ".../bench-in-<nonce>-7".
                let tail = message.topic.split(separator: "/").last ?? ""
                guard let c = Int(tail.split(separator: "-").last ?? "") else { continue }
                relay.send(outTopic(c), message.payload)
            }
        }
        let options = self.options
        clients = try await BenchClient.connectAll(options.clients) { c in
            try await BenchClient(broker: options.broker, as: 0, clientId: "bench-relay-\(options.nonce)-\(c)", filters: [outTopic(c)]) { message, at in
                // Read the id the way the coordinator reads an event: a full parse.
                guard let json = try? JSON.parse(message.payload), let id = json["eventId"]?.stringValue else { return }
                tracker.answered(id: id, status: "accepted", code: nil, version: nil, at: at)
            }
        }
    }

    func setup() -> [[Outgoing]] { [] }

    func next(_ seq: Int) -> Outgoing {
        let c = seq % options.clients
        cursor += 1
        let id = "\(options.nonce)-r\(cursor)"
        // The same size as a rooms update.
        let event = EditEvent(eventId: id, type: .update, stickerId: "s\(seq % 50)", timestamp: wallMillis(),
                              image: options.messageBytes > 0 ? filler(options.messageBytes, limit: 256) : nil,
                              frame: Frame(x: Double(seq % 700), y: 12.5, width: 120, height: 80))
        return Outgoing(client: c, topic: inTopic(c), payload: event.json().serialized(), id: id, target: target)
    }

    func closeRelay() async {
        await relay?.close()
        relayTask?.cancel()
    }
}
