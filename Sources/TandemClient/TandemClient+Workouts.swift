import TandemCore

extension TandemClient {
    // MARK: Workouts

    /// The workout's retained snapshots, as they come (at most once a second while it
    /// runs, at once on every status change), each newer than the last (a new epoch
    /// starts over).
    public func workout(_ id: String) async throws -> AsyncStream<WorkoutSnapshot> {
        if workouts[id] == nil {
            workouts[id] = Broadcast()
            try await follow([topics.workoutState(user: user, workout: id)]) { client, message in
                client.receive(workout: id, message)
            }
        }
        return workouts[id]!.listen()
    }

    private func receive(workout id: String, _ message: TransportMessage) {
        guard let snapshot = read("workout state", message, WorkoutSnapshot.decode) else { return }
        if let current = workouts[id]?.current, current.epoch == snapshot.epoch, current.version >= snapshot.version { return }
        workouts[id]?.send(snapshot)
    }

    /// Every workout of this user (`users/{user}/workouts/+/state`), as its snapshots
    /// come: the latest of each workout held first (oldest start first), then every newer
    /// one (a new epoch starts over). Nothing is dropped.
    public func allWorkoutSnapshots() async throws -> AsyncStream<WorkoutSnapshot> {
        try await followAllWorkouts()
        return allWorkouts!.listen(first: latestWorkouts.values.sorted { $0.startedAt < $1.startedAt })
    }

    func followAllWorkouts() async throws {
        if allWorkouts == nil {
            allWorkouts = Broadcast(buffering: .unbounded)
            try await follow([topics.allWorkoutStates(user: user)]) { client, message in
                client.receive(anyWorkout: message)
            }
        }
    }

    private func receive(anyWorkout message: TransportMessage) {
        guard !message.payload.isEmpty, let snapshot = read("workout state", message, WorkoutSnapshot.decode) else { return }
        if let current = latestWorkouts[snapshot.workoutId], current.epoch == snapshot.epoch, current.version >= snapshot.version { return }
        latestWorkouts[snapshot.workoutId] = snapshot
        allWorkouts?.send(snapshot)
    }

    /// Starts, pauses, resumes or stops a workout from `device`; returns the receipt.
    public func control(
        _ type: WorkoutControl.Kind, workout: String, from device: Device, mode: WorkoutMode? = nil,
        timestamp: Millis = WallClock.now()
    ) async throws -> Receipt {
        let control = WorkoutControl(commandId: ids.next(), type: type, timestamp: timestamp, mode: mode)
        return try await receipt(of: control.commandId) { post(control, workout: workout, from: device) }
    }

    /// Sends a workout control without waiting; its receipt comes on ``receipts()``.
    /// `label` defaults to "type workout".
    @discardableResult
    public func post(_ control: WorkoutControl, workout: String, from device: Device, label: String? = nil) -> Outgoing {
        post(id: control.commandId, topic: topics.workoutControl(user: user, workout: workout, device: device),
             payload: control.json.serialized(), label: label ?? "\(control.type.rawValue) \(workout)")
    }

    /// Which role `device` plays in a workout, from its snapshot's origin: the origin
    /// publishes flight data, the other device mirrors it.
    public nonisolated func startOrigin(of device: Device, in snapshot: WorkoutSnapshot) -> StartOrigin {
        snapshot.origin == device ? .local : .remote
    }

    /// Publishes a flight sample from the origin device, throttled to one every
    /// ``flightInterval``; returns whether it went out. A sample not newer than the
    /// last one published never goes (the coordinator would refuse it as `stale`).
    /// Telemetry gets a receipt only when rejected (on ``receipts()``), so it is not
    /// resent.
    ///
    /// - Parameter force: publish it even within the interval: the last sample before a
    ///   stop, so that the summary has the distance up to the stop.
    @discardableResult
    public func publishFlight(_ flight: FlightData, workout: String, from device: Device, force: Bool = false) throws -> Bool {
        let key = "\(workout)/\(device.rawValue)"
        if let last = lastFlight[key], flight.timestamp <= last || (!force && flight.timestamp - last < flightInterval) { return false }
        lastFlight[key] = flight.timestamp
        try transport.enqueue(topics.flight(user: user, workout: workout, device: device), payload: flight.json.serialized(), retain: false)
        return true
    }

    /// Publishes a health sample (the watch does, whichever device is origin).
    public func publishHealth(_ health: HealthData, workout: String) throws {
        try transport.enqueue(topics.health(user: user, workout: workout, device: .watch), payload: health.json.serialized(), retain: false)
    }

    /// The origin's flight samples, for the other device to mirror (it shows them and
    /// takes elapsedTime from them), each newer than the last.
    public func mirroredFlights(workout: String, origin: Device) async throws -> AsyncStream<FlightData> {
        try await samples(topics.flight(user: user, workout: workout, device: origin), { $0.timestamp }) { try? FlightData.decode($0) }
    }

    /// The watch's health samples, for the phone, each newer than the last.
    public func healthSamples(workout: String) async throws -> AsyncStream<HealthData> {
        try await samples(topics.health(user: user, workout: workout, device: .watch), { $0.timestamp }) { try? HealthData.decode($0) }
    }

    /// The samples on `topic`, in the order of their timestamps: one that arrives after
    /// a newer one is dropped.
    private func samples<T: Sendable>(
        _ topic: String, _ timestamp: @escaping @Sendable (T) -> Millis, _ decode: @escaping @Sendable ([UInt8]) -> T?
    ) async throws -> AsyncStream<T> {
        let source = try await transport.subscribe([topic])
        let (stream, continuation) = AsyncStream<T>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let task = Task {
            var newest: Millis?
            do {
                for try await message in source {
                    guard let value = decode(message.payload) else { continue }
                    if let newest, timestamp(value) <= newest { continue }
                    newest = timestamp(value)
                    continuation.yield(value)
                }
            } catch {}
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        tasks.append(task)
        return stream
    }
}
