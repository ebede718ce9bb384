import Foundation
import Synchronization
import TandemCore
import TandemMQTT

/// `chat`: what one conversation costs the broker per message sent, at two paces: a
/// burst (20 messages 50 ms apart) and a person's (10 messages 1.5 s apart), each in a
/// conversation that already holds `history` messages. Two clients, one per participant,
/// subscribe to exactly what a participant's app does for one conversation (its
/// snapshot, its ConversationChanges, its receipts); every byte the broker delivers to
/// them from the first measured message until the conversation is quiet again (its
/// trailing snapshot included) is counted as MQTT v5 PUBLISH packets.
struct ChatBytes {
    struct Pace: Sendable {
        var name: String
        var messages: Int
        var intervalMs: Int
    }

    static let paces = [
        Pace(name: "burst", messages: 20, intervalMs: 50),
        Pace(name: "person", messages: 10, intervalMs: 1_500),
    ]

    struct Result: Sendable {
        var pace: Pace
        var snapshots = Tally()
        var changes = Tally()
        var receipts = Tally()

        var conversationBytes: Int { snapshots.bytes + changes.bytes }
        var perMessage: Double { Double(conversationBytes) / Double(pace.messages) }
        var perMessageWithReceipts: Double { Double(conversationBytes + receipts.bytes) / Double(pace.messages) }
    }

    struct Tally: Sendable {
        var packets = 0
        var bytes = 0
    }

    let broker: BrokerAddress
    let topics: Topics
    let nonce: String
    let textBytes: Int
    let history: Int
    /// How long the conversation is left alone after the last measured message, so that
    /// the coordinator's paced snapshot (10 s by default) is counted.
    let settleSeconds: Double
    let progress: Bool

    func run() async throws -> [Result] {
        var results: [Result] = []
        for (i, pace) in Self.paces.enumerated() {
            results.append(try await measure(pace, pair: i))
        }
        return results
    }

    /// The bytes of one PUBLISH as the broker sends it (QoS 1, MQTT v5, no properties).
    static func packetBytes(topic: String, payload: Int) -> Int {
        let remaining = 2 + topic.utf8.count + 2 + 1 + payload
        var varint = 1
        var rest = remaining >> 7
        while rest > 0 { varint += 1; rest >>= 7 }
        return 1 + varint + remaining
    }

    private final class Counter: Sendable {
        struct State {
            var counting = false
            var result: Result
            var receipts: Set<String> = []
        }
        let state: Mutex<State>
        init(pace: Pace) { state = Mutex(State(result: Result(pace: pace))) }

        func heard(_ message: MQTTMessage) {
            let bytes = ChatBytes.packetBytes(topic: message.topic, payload: message.payload.count)
            let receiptId = message.topic.hasSuffix("/receipts") ? WireScan.receipt(message.payload)?.id : nil
            state.withLock { s in
                if let receiptId { s.receipts.insert(receiptId) }
                guard s.counting else { return }
                if message.topic.hasSuffix("/receipts") {
                    s.result.receipts.packets += 1
                    s.result.receipts.bytes += bytes
                } else if message.topic.hasSuffix("/changes") {
                    s.result.changes.packets += 1
                    s.result.changes.bytes += bytes
                } else {
                    s.result.snapshots.packets += 1
                    s.result.snapshots.bytes += bytes
                }
            }
        }

        func answered(_ ids: [String]) -> Bool { state.withLock { s in ids.allSatisfy(s.receipts.contains) } }
    }

    private func measure(_ pace: Pace, pair: Int) async throws -> Result {
        let users = ["chat-\(nonce)-\(pair)a", "chat-\(nonce)-\(pair)b"]
        let counter = Counter(pace: pace)
        var clients: [BenchClient] = []
        for (c, user) in users.enumerated() {
            let peer = users[1 - c]
            clients.append(try await BenchClient(
                broker: broker, clientId: "bench-chat-\(nonce)-\(pair)-\(c)",
                filters: [topics.conversation(user: user, peer: peer), topics.conversationChanges(user: user, peer: peer), topics.receipts(user: user)],
                onMessage: { message, _ in counter.heard(message) }))
        }
        var sequence = 0
        func send(_ c: Int, _ type: DMCommand.Kind, text: String? = nil) -> String {
            sequence += 1
            let id = "chat-\(nonce)-\(pair)-\(sequence)"
            let command = DMCommand(commandId: id, type: type, peer: users[1 - c], timestamp: wallMillis(), text: text)
            clients[c].send(topics.dmCommands(user: users[c]), command.json.serialized())
            return id
        }
        let text = filler(textBytes, limit: 4096)

        say("chat \(pace.name): a conversation of \(history) messages")
        try await waitFor(counter, [send(0, .request, text: text)])
        try await waitFor(counter, [send(1, .accept)])
        var ids: [String] = []
        for i in 0..<history {
            ids.append(send(i % 2, .message, text: text))
            if i % 50 == 49 { try await Task.sleep(for: .milliseconds(100)) }
        }
        try await waitFor(counter, ids)
        try await Task.sleep(for: .seconds(settleSeconds))

        say("chat \(pace.name): \(pace.messages) messages \(pace.intervalMs) ms apart, then \(Int(settleSeconds)) s quiet")
        counter.state.withLock { $0.counting = true }
        ids = []
        for i in 0..<pace.messages {
            if i > 0 { try await Task.sleep(for: .milliseconds(pace.intervalMs)) }
            ids.append(send(i % 2, .message, text: text))
        }
        try await waitFor(counter, ids)
        try await Task.sleep(for: .seconds(settleSeconds))
        let result = counter.state.withLock { s in
            s.counting = false
            return s.result
        }
        for client in clients { await client.close() }
        return result
    }

    private func waitFor(_ counter: Counter, _ ids: [String]) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !counter.answered(ids) {
            guard ContinuousClock.now < deadline else { throw ChatBytesError(message: "no receipt within 60 s for some of \(ids.count) commands") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    private func say(_ text: String) {
        if progress { FileHandleOutput.warn(text) }
    }

    struct ChatBytesError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    static func table(_ results: [Result], textBytes: Int, history: Int) -> String {
        var lines = [
            "chat: broker bytes per message sent (MQTT v5 PUBLISH packets to both participants), \(textBytes)-byte texts, a \(history)-message conversation",
            "pace     messages  interval  snapshots      changes        receipts       per message  with receipts",
        ]
        for r in results {
            func cell(_ t: Tally) -> String { "\(t.packets) / \(t.bytes) B".padding(toLength: 15, withPad: " ", startingAt: 0) }
            lines.append(
                r.pace.name.padding(toLength: 9, withPad: " ", startingAt: 0)
                + String(r.pace.messages).padding(toLength: 10, withPad: " ", startingAt: 0)
                + "\(r.pace.intervalMs) ms".padding(toLength: 10, withPad: " ", startingAt: 0)
                + cell(r.snapshots) + cell(r.changes) + cell(r.receipts)
                + "\(Int(r.perMessage.rounded())) B".padding(toLength: 13, withPad: " ", startingAt: 0)
                + "\(Int(r.perMessageWithReceipts.rounded())) B")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func json(_ results: [Result], textBytes: Int, history: Int) -> String {
        let runs: [JSON] = results.map { r in
            .obj([
                "pace": .string(r.pace.name), "messages": .int(Int64(r.pace.messages)), "intervalMs": .int(Int64(r.pace.intervalMs)),
                "snapshotPackets": .int(Int64(r.snapshots.packets)), "snapshotBytes": .int(Int64(r.snapshots.bytes)),
                "changesPackets": .int(Int64(r.changes.packets)), "changesBytes": .int(Int64(r.changes.bytes)),
                "receiptPackets": .int(Int64(r.receipts.packets)), "receiptBytes": .int(Int64(r.receipts.bytes)),
                "bytesPerMessage": .double(r.perMessage), "bytesPerMessageWithReceipts": .double(r.perMessageWithReceipts),
            ])
        }
        return String(decoding: JSON.obj(["scenario": "chat", "textBytes": .int(Int64(textBytes)), "history": .int(Int64(history)), "runs": .array(runs)]).serialized(), as: UTF8.self)
    }
}
