import TandemCore

/// `telemetry`: `--clients` workouts, one connection each publishing as both devices of
/// its user: start (phone, mirrored), then flight from the phone and health from the
/// watch at 1 Hz each, then stop. Telemetry gets no receipt when accepted, so the
/// figure is sample-to-snapshot latency (the snapshot is throttled to once a second by
/// contract) and the snapshot rate per workout; the controls get receipts.
final class TelemetryScenario: Scenario {
    let name = "telemetry"
    let options: ScenarioOptions
    private(set) var clients: [BenchClient] = []
    private var targets: [Int32] = []
    private var samples: [Int] = []
    private var lastTimestamp: [Int64] = []

    init(options: ScenarioOptions) {
        self.options = options
    }

    var shape: [String: Int] { ["workouts": options.clients] }
    var fixedRate: Double? { Double(options.clients * 2) }
    func user(_ c: Int) -> String { options.broker.user(c, otherwise: "t\(c)") }
    func workout(_ c: Int) -> String { "w\(options.nonce)-\(c)" }

    func connect(tracker: Tracker) async throws {
        let topics = options.topics
        targets = (0..<options.clients).map { tracker.target(topics.workoutState(user: user($0), workout: workout($0))) }
        samples = Array(repeating: 0, count: options.clients)
        lastTimestamp = Array(repeating: 0, count: options.clients)
        let handler = receiptHandler(tracker)
        let options = self.options
        clients = try await BenchClient.connectAll(options.clients) { c in
            try await BenchClient(broker: options.broker, as: c, clientId: "bench-\(options.nonce)-\(c)",
                                  filters: [topics.receipts(user: options.broker.user(c, otherwise: "t\(c)")), "\(topics.root)/users/\(options.broker.user(c, otherwise: "t\(c)"))/workouts/+/state"], onMessage: handler)
        }
    }

    func control(_ c: Int, _ type: WorkoutControl.Kind) -> Outgoing {
        let id = "\(options.nonce)-\(type.rawValue)\(c)"
        let control = WorkoutControl(commandId: id, type: type, timestamp: wallMillis(), mode: type == .start ? .mirrored : nil)
        return Outgoing(client: c, topic: options.topics.workoutControl(user: user(c), workout: workout(c), device: .phone),
                        payload: control.json.serialized(), id: id, target: targets[c])
    }

    func setup() -> [[Outgoing]] { [(0..<options.clients).map { control($0, .start) }] }

    func next(_ seq: Int) -> Outgoing {
        let c = seq % options.clients
        let j = samples[c]
        samples[c] += 1
        // Strictly increasing per workout, as `stale` requires of flight.
        let ts = max(wallMillis(), lastTimestamp[c] + 1)
        lastTimestamp[c] = ts
        let expected = Int64(j + 2) // start made version 1
        if j % 2 == 0 {
            let flight = FlightData(timestamp: ts, elapsedTime: Double(j / 2), distance: Double(j) * 1.4, pace: 360, altitude: 120,
                                    heading: 90, gpwsStatus: .normal, latitude: 47.5, longitude: 8.5)
            return Outgoing(client: c, topic: options.topics.flight(user: user(c), workout: workout(c), device: .phone),
                            payload: flight.json.serialized(), id: "flight:\(ts)", target: targets[c], expectedVersion: expected)
        }
        let health = HealthData(timestamp: ts, heartRate: 120 + Double(j % 30), cadence: 170, activeEnergy: Double(j))
        return Outgoing(client: c, topic: options.topics.health(user: user(c), workout: workout(c), device: .watch),
                        payload: health.json.serialized(), id: "health:\(ts)", target: targets[c], expectedVersion: expected)
    }

    func teardown() -> [Outgoing] { (0..<options.clients).map { control($0, .stop) } }
}
