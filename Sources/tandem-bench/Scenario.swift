import TandemCore

/// One message the driver sends.
struct Outgoing {
    var client: Int
    var topic: String
    var payload: [UInt8]
    var id: String
    var target: Int32
    /// For events that get no receipt (telemetry): the version they will make visible.
    var expectedVersion: Int64 = 0
}

/// A load scenario: clients, what to set up before measuring, and the event stream.
///
/// The driver calls ``next(_:)`` from one task only, so scenarios keep plain state.
protocol Scenario: AnyObject {
    var name: String { get }
    var clients: [BenchClient] { get }
    /// Connects the clients (subscribed before connecting).
    func connect(tracker: Tracker) async throws
    /// Messages to send, unmeasured, before the load (creates, requests, starts).
    func setup() -> [[Outgoing]]
    /// The `seq`-th message of the load.
    func next(_ seq: Int) -> Outgoing
    /// Messages to send, unmeasured, after the load (stops).
    func teardown() -> [Outgoing]
    /// A rate the scenario sets itself (telemetry: 1 Hz per device), overriding `--rate`.
    var fixedRate: Double? { get }
    /// Counted units for the report (rooms, pairs, workouts).
    var shape: [String: Int] { get }
}

extension Scenario {
    func teardown() -> [Outgoing] { [] }
    var fixedRate: Double? { nil }

    func close() async {
        for c in clients { await c.close() }
    }
}

/// Options every scenario shares.
struct ScenarioOptions: Sendable {
    var broker: BrokerAddress
    var clients: Int
    var rooms: Int
    var stickers: Int
    var messageBytes: Int
    var nonce: String
    var topics = Topics()
}

/// A padding string of `n` characters (1...limit), for message-size experiments.
func filler(_ n: Int, limit: Int) -> String {
    String(repeating: "x", count: max(1, min(limit, n)))
}
