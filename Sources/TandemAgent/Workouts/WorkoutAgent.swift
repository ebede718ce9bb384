import TandemCore

/// `tandem-agent workout`: one device (phone or watch) of a workout, following its
/// startOrigin.
///
/// - local: sends `start`, replays the route at 1 Hz through the flight computer and
///   publishes flight data through the client, which keeps to its `flightInterval`;
///   the remote never runs GPS.
/// - remote: waits for the retained state to show the workout running with the other
///   device as origin, then shows the origin's flight data, its elapsed time taken from
///   each sample and ticking locally in between.
/// - The watch publishes health data every second while running, in both roles; the
///   phone shows the watch's.
/// - Ctrl-C or `duration` sends `stop`; it exits 0 once the state says finished.
public actor WorkoutAgent {
    public let session: AgentSession
    public let options: WorkoutOptions
    private var console: Console { session.console }
    private var client: TandemClient { session.client }

    private var snapshot: WorkoutSnapshot?
    private var runningSince: Millis?
    private var startId: String?
    private var startReceipt: Receipt?
    private var stopSentAt: Millis?
    private var finished = false

    // local
    private var computer: FlightComputer
    private var replay: RouteReplay?

    // remote
    private var lastFlight: FlightData?
    private var lastFlightAt: Millis = 0

    // health
    private var simulator: HealthSimulator
    private var lastHealth: HealthData?

    /// How long to wait for `start`'s receipt, and for the finished state after `stop`.
    public static let answerTimeout: Millis = 30_000

    public init(session: AgentSession, options: WorkoutOptions) {
        self.session = session
        self.options = options
        computer = FlightComputer(targetPace: options.targetPace)
        simulator = HealthSimulator(seed: UInt64.random(in: 0...UInt64.max))
    }

    private var workout: String { options.workoutId }
    private var device: Device { options.device }

    /// Runs the workout to its end. Returns the exit code.
    public func run(signals: AsyncStream<Int32>) async throws -> Int32 {
        let states = try await client.workout(workout)
        let health = device == .phone ? try await client.healthSamples(workout: workout) : nil
        let receipts = await client.receipts()
        let connection = await client.connectionChanges()
        try await session.connect()

        return try await withThrowingTaskGroup(of: Int32?.self) { group in
            group.addTask { await self.session.reportConnection(connection); return nil }
            group.addTask {
                for await event in receipts { await self.handle(event) }
                return nil
            }
            group.addTask {
                for await state in states { await self.handle(state: state) }
                return nil
            }
            if let health {
                group.addTask {
                    for await sample in health { await self.handle(health: sample) }
                    return nil
                }
            }
            group.addTask {
                var interrupts = 0
                for await _ in signals {
                    interrupts += 1
                    if interrupts > 1 { return 130 }
                    if let code = await self.interrupted() { return code }
                }
                return nil
            }
            group.addTask { try await self.drive() }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let code = result {
                    await self.session.close()
                    return code
                }
            }
            return 1
        }
    }

    // MARK: The main line

    private func drive() async throws -> Int32? {
        switch options.startOrigin {
        case .local:
            try await start()
        case .remote:
            guard let origin = try await waitForRemoteStart() else { return finishedCode() }
            let flights = try await client.mirroredFlights(workout: workout, origin: origin)
            Task { [weak self] in
                for await flight in flights { await self?.handle(flight: flight) }
            }
        }
        // One tick a second, on the second of the wall clock.
        while !finished {
            let now = WallClock.now()
            try await Task.sleep(for: .milliseconds(1_000 - now % 1_000))
            try await tick(at: WallClock.now())
        }
        return finishedCode()
    }

    private func start() async throws {
        let now = WallClock.now()
        let control = WorkoutControl(commandId: await client.nextId(), type: .start, timestamp: now, mode: options.mode)
        startId = control.commandId
        await client.post(control, workout: workout, from: device, label: "start \(workout)")
        console.line("starting \(workout) on the \(device.rawValue)\(options.mode.map { " (\($0.rawValue))" } ?? "")…")
        while startReceipt == nil {
            if WallClock.now() - now > Self.answerTimeout {
                throw AgentError("no receipt for start within \(Self.answerTimeout / 1000) s (is the coordinator running?)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        if let receipt = startReceipt, receipt.status == .rejected {
            throw AgentError("start rejected: \(receipt.code?.rawValue ?? "error"): \(receipt.message)")
        }
        let began = WallClock.now()
        runningSince = began
        var replay = RouteReplay(fixes: options.route ?? DemoRoute.fixes(start: began, pace: options.targetPace ?? 330))
        replay.start(at: began)
        self.replay = replay
        try await tick(at: began)
    }

    /// Waits for the retained state to show the workout started by the other device.
    /// Returns the origin, or nil when it is already finished.
    private func waitForRemoteStart() async throws -> Device? {
        console.line("waiting for \(workout) to start on the \(device.other.rawValue)…")
        while true {
            if let s = snapshot {
                if s.status == .finished { return nil }
                guard client.startOrigin(of: device, in: s) == .remote else {
                    throw AgentError("\(workout) was started on this device (\(device.rawValue)); run it with --start-origin local")
                }
                runningSince = WallClock.now()
                console.line("\(workout) started on the \(s.origin.rawValue) (\(s.mode.rawValue)); mirroring it")
                return s.origin
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    private func tick(at now: Millis) async throws {
        guard !finished else { return }
        let running = snapshot?.status ?? .running == .running
        if options.startOrigin == .local, var replay {
            if running {
                for fix in replay.due(at: now) { _ = computer.add(fix) }
                if replay.isFinished, stopSentAt == nil {
                    console.line("route finished")
                    await sendStop()
                }
            }
            self.replay = replay
            // The client keeps to the flight interval (and never sends a sample twice).
            if let current = computer.current { await publishFlight(current, at: now) }
        }
        if device == .watch, running {
            let sample = simulator.sample(at: now, pace: currentPace ?? 0)
            lastHealth = sample
            try? await client.publishHealth(sample, workout: workout)
            console.object(sample.json.typed("health").adding("direction", "sent"))
        }
        if let duration = options.duration, let since = runningSince, stopSentAt == nil, Double(now - since) >= duration * 1_000 {
            await sendStop()
        }
        if let sent = stopSentAt, now - sent > Self.answerTimeout {
            throw AgentError("stop sent but the workout did not finish within \(Self.answerTimeout / 1000) s")
        }
        if console.isTerminal { console.status(statusLine(at: now).text) }
        // With --json, what the status line shows, once a tick (on the wall clock's
        // second, as on the other device), with the time it was taken.
        console.object(statusLine(at: now).json.adding("timestamp", .int(now)))
    }

    /// Publishes a flight sample through the client's throttle (`force`: past it) and
    /// says so when it went out.
    private func publishFlight(_ flight: FlightData, at now: Millis, force: Bool = false) async {
        guard (try? await client.publishFlight(flight, workout: workout, from: device, force: force)) == true else { return }
        console.object(flight.json.typed("flight").adding("direction", "sent"))
        if !console.isTerminal { console.status(statusLine(at: now).text) }
    }

    private func sendStop() async {
        guard stopSentAt == nil, !finished else { return }
        let now = WallClock.now()
        stopSentAt = now
        // The last flight first, so the summary has the distance run up to the stop.
        if options.startOrigin == .local, let current = computer.current {
            await publishFlight(current, at: now, force: true)
        }
        let control = WorkoutControl(commandId: await client.nextId(), type: .stop, timestamp: now)
        console.line("stopping \(workout)…")
        await client.post(control, workout: workout, from: device, label: "stop \(workout)")
    }

    /// Ctrl-C: stop a running workout; before one started, just leave. Returns an exit
    /// code when the agent should end now.
    private func interrupted() async -> Int32? {
        if finished { return 0 }
        if runningSince == nil {
            console.line("interrupted before the workout started")
            return 130
        }
        await sendStop()
        return nil
    }

    // MARK: What arrives

    private var currentPace: Double? {
        options.startOrigin == .local ? computer.current?.pace : lastFlight?.pace
    }

    private func statusLine(at now: Millis) -> WorkoutStatusLine {
        let status = snapshot?.status ?? (runningSince == nil ? nil : .running)
        let flight = options.startOrigin == .local ? computer.current : lastFlight
        let elapsed: Double
        if options.startOrigin == .local {
            elapsed = computer.current == nil ? 0 : computer.elapsedTime(at: now)
        } else if let lastFlight {
            // The sample's elapsedTime was true at its own timestamp (its GPS fix), which
            // is older than its arrival by the fix's age (up to a second at 1 Hz) plus
            // the trip. Ticking from the arrival showed the origin's time up to a second
            // late; tick from the timestamp, kept within the second before the arrival
            // so that a remote whose clock is off cannot run the display away.
            let reference = min(lastFlightAt, max(lastFlight.timestamp, lastFlightAt - 1_000))
            let ticking = status == .running ? Double(max(0, now - reference)) / 1_000 : 0
            elapsed = lastFlight.elapsedTime + ticking
        } else {
            elapsed = snapshot?.elapsedTime ?? 0
        }
        return WorkoutStatusLine(
            device: device, startOrigin: options.startOrigin, status: status, elapsed: elapsed,
            distance: flight?.distance ?? 0, pace: flight?.pace, alert: flight?.gpwsStatus ?? .normal,
            heartRate: lastHealth?.heartRate ?? snapshot?.health?.heartRate
        )
    }

    private func handle(_ event: ReceiptEvent) {
        switch event {
        case .telemetryRejected(let receipt):
            console.output(human: "rejected \(receipt.id): \(receipt.code?.rawValue ?? "error"): \(receipt.message)",
                           json: receipt.json.typed("receipt"))
        case .settled(let outgoing, let receipt):
            guard receipt.kind == .workout else { return }
            if outgoing.id == startId {
                // A rejected start ends the agent with its own message (start()).
                startReceipt = receipt
                console.object(receipt.json.typed("receipt"))
            } else {
                console.receipt(receipt, label: outgoing.label)
            }
        }
    }

    private func handle(state new: WorkoutSnapshot) {
        let previous = snapshot?.status
        snapshot = new
        guard previous != new.status else { return }
        let now = WallClock.now()
        if options.startOrigin == .local {
            if new.status == .paused { computer.pause(at: now) }
            if new.status == .running, previous == .paused { computer.resume(at: now) }
        }
        console.output(human: "\(workout): \(new.status.rawValue) (origin \(new.origin.rawValue), \(new.mode.rawValue))",
                       json: new.json.typed("state"))
        if new.status == .finished, runningSince != nil || options.startOrigin == .remote {
            finished = true
        }
    }

    private func handle(flight: FlightData) {
        lastFlight = flight
        lastFlightAt = WallClock.now()
        console.object(flight.json.typed("flight").adding("direction", "received"))
        if !console.isTerminal { console.status(statusLine(at: lastFlightAt).text) }
    }

    private func handle(health: HealthData) {
        lastHealth = health
        console.object(health.json.typed("health").adding("direction", "received"))
    }

    private func finishedCode() -> Int32 {
        console.clearStatus()
        guard let s = snapshot else { return 0 }
        if let summary = s.summary {
            console.output(human: "\(workout) finished: \(summary.text)",
                           json: summary.json.typed("summary").adding("workoutId", .string(workout)))
        } else {
            console.output(human: "\(workout) finished", json: .obj(["type": "summary", "workoutId": .string(workout)]))
        }
        return 0
    }
}

extension JSON {
    /// The same object with one more member at the end.
    public func adding(_ key: String, _ value: JSON) -> JSON {
        guard case .object(let members) = self else { return self }
        return .object(members + [Member(key, value)])
    }
}
