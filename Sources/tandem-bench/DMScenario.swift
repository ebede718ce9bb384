import TandemCore

/// `dm`: clients in pairs (2p, 2p+1) chatting. Setup: the even one requests, the odd
/// one accepts (`already_active` from an earlier run is fine). Load: each client sends
/// `message` commands (text of `--message-bytes`) to its peer; every tenth command is a
/// `read`. Each client watches its own views (`users/{me}/dm/conversations/+`).
final class DMScenario: Scenario {
    let name = "dm"
    let options: ScenarioOptions
    private(set) var clients: [BenchClient] = []
    private var targets: [Int32] = []
    private var cursor: [Int] = []

    init(options: ScenarioOptions) {
        self.options = options
    }

    var pairCount: Int { options.clients / 2 }
    var shape: [String: Int] { ["clients": pairCount * 2, "conversations": pairCount] }
    func user(_ c: Int) -> String { options.broker.user(c, otherwise: "d\(c)") }
    func peer(_ c: Int) -> Int { c ^ 1 }

    func connect(tracker: Tracker) async throws {
        precondition(pairCount > 0, "dm needs at least 2 clients")
        let topics = options.topics
        targets = (0..<pairCount * 2).map { tracker.target(topics.conversation(user: user($0), peer: user(peer($0)))) }
        cursor = Array(repeating: 0, count: pairCount * 2)
        let handler = receiptHandler(tracker)
        let options = self.options
        clients = try await BenchClient.connectAll(pairCount * 2) { c in
            try await BenchClient(broker: options.broker, as: c, clientId: "bench-\(options.nonce)-\(c)",
                                  filters: [topics.receipts(user: options.broker.user(c, otherwise: "d\(c)")), topics.conversations(user: options.broker.user(c, otherwise: "d\(c)")),
                                            topics.allConversationChanges(user: options.broker.user(c, otherwise: "d\(c)"))], onMessage: handler)
        }
    }

    func command(client c: Int, type: DMCommand.Kind, id: String, text: String? = nil) -> Outgoing {
        let command = DMCommand(commandId: id, type: type, peer: user(peer(c)), timestamp: wallMillis(), text: text)
        return Outgoing(client: c, topic: options.topics.dmCommands(user: user(c)), payload: command.json.serialized(), id: id, target: targets[c])
    }

    func setup() -> [[Outgoing]] {
        let requests = (0..<pairCount).map { p in command(client: 2 * p, type: .request, id: "\(options.nonce)-q\(p)", text: "hello") }
        let accepts = (0..<pairCount).map { p in command(client: 2 * p + 1, type: .accept, id: "\(options.nonce)-a\(p)") }
        return [requests, accepts]
    }

    func next(_ seq: Int) -> Outgoing {
        let c = seq % (pairCount * 2)
        let j = cursor[c]
        cursor[c] += 1
        let id = "\(options.nonce)-\(c)-\(j)"
        if j % 10 == 9 { return command(client: c, type: .read, id: id) }
        return command(client: c, type: .message, id: id, text: filler(options.messageBytes, limit: 4096))
    }
}
