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
    /// Whether every event of the load is meant to be accepted (a rejection means the
    /// run measured something other than what it says: the run fails).
    var everyEventAccepted: Bool { get }
}

extension Scenario {
    func teardown() -> [Outgoing] { [] }
    var fixedRate: Double? { nil }
    var everyEventAccepted: Bool { false }

    func close() async {
        for c in clients { await c.close() }
    }
}

/// The codes a setup message may be answered with and still leave the setup whole: what
/// an earlier run on the same database already made. Any other refusal (`room_full`,
/// `not_member`, `unknown_user`, ...) means part of the load would never reach the rules.
let setupCodesTolerated: Set<String> = ["already_member", "already_exists", "already_requested", "already_active"]

/// Why a setup was refused, in words an operator can act on.
func setupRefusal(_ codes: [String: Int], scenario: String) -> String {
    let list = codes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    var hint = ""
    if codes["room_full"] != nil || codes["not_member"] != nil {
        hint = " (room_full: the coordinator's --max-room-members, 8 by default, is below the members a room of this run has; scripts/bench passes --max-room-members 10000)"
    } else if codes["unknown_user"] != nil {
        hint = " (unknown_user: the broker does not know the bench's users; BENCH_USERS must cover --clients)"
    } else if codes["rate_limited"] != nil {
        hint = " (rate_limited: start the coordinator with --rate-limit 0)"
    }
    return "\(scenario) setup incomplete: refused \(list)\(hint); the measured load would not reach the rules"
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
