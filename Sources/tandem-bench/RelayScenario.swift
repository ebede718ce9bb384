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

    var root: String { "bench/relay/\(options.nonce)" }
    var shape: [String: Int] { ["clients": options.clients] }

    func connect(tracker: Tracker) async throws {
        target = tracker.target("relay")
        let (stream, feed) = AsyncStream.makeStream(of: MQTTMessage.self)
        let relay = try await BenchClient(broker: options.broker, clientId: "bench-relay-\(options.nonce)", filters: ["\(root)/in/+"]) { message, _ in
            feed.yield(message)
        }
        self.relay = relay
        let root = self.root
        relayTask = Task {
            for await message in stream {
                guard let slash = message.topic.lastIndex(of: "/") else { continue }
                relay.send("\(root)/out/\(message.topic[message.topic.index(after: slash)...])", message.payload)
            }
        }
        let options = self.options
        clients = try await BenchClient.connectAll(options.clients) { c in
            try await BenchClient(broker: options.broker, clientId: "bench-relay-\(options.nonce)-\(c)", filters: ["\(root)/out/\(c)"]) { message, at in
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
        return Outgoing(client: c, topic: "\(root)/in/\(c)", payload: event.json().serialized(), id: id, target: target)
    }

    func closeRelay() async {
        await relay?.close()
        relayTask?.cancel()
    }
}
