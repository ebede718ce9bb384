extension WorkoutState {
    /// The WorkoutSnapshot exactly as the contract shows it.
    public func snapshot(epoch: String) -> JSON {
        workoutSnapshot(epoch: epoch).json
    }

    public func workoutSnapshot(epoch: String) -> WorkoutSnapshot {
        WorkoutSnapshot(
            user: user, workoutId: workoutId, epoch: epoch, status: status, mode: mode, origin: origin,
            startedAt: startedAt, endedAt: endedAt, elapsedTime: elapsedTime, flight: flight,
            health: health, summary: summary, version: version
        )
    }

    // MARK: Persistence

    /// Everything the state holds, for the store.
    public func persisted() -> JSON {
        .obj([
            "user": .string(user),
            "workoutId": .string(workoutId),
            "status": .string(status.rawValue),
            "mode": .string(mode.rawValue),
            "origin": .string(origin.rawValue),
            "startedAt": .int(startedAt),
            "endedAt": JSON(endedAt),
            "flight": flight?.json ?? .null,
            "health": health?.json ?? .null,
            "heartRate": .obj([
                "count": .int(Int64(heartRate.count)),
                "sum": .double(heartRate.sum),
                "max": JSON(heartRate.maximum),
            ]),
            "version": .int(version),
        ])
    }

    /// Rebuilds a state from `persisted()`, checking every field.
    public init(persisted json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("a persisted workout must be an object") }
        let reader = PayloadReader(object: json)
        let status = try reader.oneOf("status", WorkoutStatus.self)
        let endedAt: Millis? = reader.has("endedAt") ? try reader.int64("endedAt") : nil
        guard (status == .finished) == (endedAt != nil) else {
            throw .invalid("a persisted workout has endedAt exactly when finished")
        }
        let stats = try reader.nested("heartRate")
        let count = try stats.int64("count")
        guard count >= 0 else { throw .invalid("heartRate.count must not be negative") }
        self.init(
            user: try reader.string("user"),
            workoutId: try reader.string("workoutId"),
            status: status,
            mode: try reader.oneOf("mode", WorkoutMode.self),
            origin: try reader.oneOf("origin", Device.self),
            startedAt: try reader.int64("startedAt"),
            endedAt: endedAt,
            flight: reader.has("flight") ? try FlightData(json: reader.object["flight"]!) : nil,
            health: reader.has("health") ? try HealthData(json: reader.object["health"]!) : nil,
            heartRate: HeartRateStatistics(count: Int(count), sum: try stats.double("sum"), maximum: try stats.optionalDouble("max")),
            version: try reader.int64("version")
        )
    }
}
