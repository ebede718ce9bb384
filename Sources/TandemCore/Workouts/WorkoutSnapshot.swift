/// A workout as published, retained, at `users/{user}/workouts/{workoutId}/state`
/// (CONTRACT "WorkoutSnapshot").
public struct WorkoutSnapshot: Sendable, Equatable {
    public let user: String
    public let workoutId: String
    public let epoch: String
    public let status: WorkoutStatus
    public let mode: WorkoutMode
    public let origin: Device
    public let startedAt: Millis
    /// Present once finished.
    public let endedAt: Millis?
    /// The last accepted flight's elapsedTime, 0 without one.
    public let elapsedTime: Double
    public let flight: FlightData?
    public let health: HealthData?
    /// Present once finished.
    public let summary: WorkoutSummary?
    public let version: Int64

    public init(
        user: String, workoutId: String, epoch: String, status: WorkoutStatus, mode: WorkoutMode,
        origin: Device, startedAt: Millis, endedAt: Millis?, elapsedTime: Double,
        flight: FlightData?, health: HealthData?, summary: WorkoutSummary?, version: Int64
    ) {
        self.user = user
        self.workoutId = workoutId
        self.epoch = epoch
        self.status = status
        self.mode = mode
        self.origin = origin
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.elapsedTime = elapsedTime
        self.flight = flight
        self.health = health
        self.summary = summary
        self.version = version
    }

    /// How `device` relates to the workout's origin.
    public func startOrigin(of device: Device) -> StartOrigin { StartOrigin(device: device, origin: origin) }

    /// The wire form, keys in the contract's order; `endedAt` and `summary` only when present.
    public var json: JSON {
        var members: [JSON.Member] = [
            .init("user", .string(user)),
            .init("workoutId", .string(workoutId)),
            .init("epoch", .string(epoch)),
            .init("status", .string(status.rawValue)),
            .init("mode", .string(mode.rawValue)),
            .init("origin", .string(origin.rawValue)),
            .init("startedAt", .int(startedAt)),
        ]
        if let endedAt { members.append(.init("endedAt", .int(endedAt))) }
        members.append(.init("elapsedTime", .double(elapsedTime)))
        members.append(.init("flight", flight?.json ?? .null))
        members.append(.init("health", health?.json ?? .null))
        if let summary { members.append(.init("summary", summary.json)) }
        members.append(.init("version", .int(version)))
        return .object(members)
    }

    /// Reads a snapshot leniently, for device agents: unknown keys are ignored; `user`,
    /// `workoutId`, `status`, `origin` and `version` are required; a missing `epoch` is "",
    /// `mode` standalone, `startedAt` and `elapsedTime` 0 (elapsedTime falls back to the
    /// flight's); a malformed `flight`, `health` or `summary` reads as absent.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("a workout snapshot must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        user = try reader.string("user")
        workoutId = try reader.string("workoutId")
        status = try reader.oneOf("status", WorkoutStatus.self)
        origin = try reader.oneOf("origin", Device.self)
        version = try reader.int64("version")
        epoch = (try? reader.optionalString("epoch")) ?? ""
        mode = (try? reader.optionalOneOf("mode", WorkoutMode.self)) ?? .standalone
        startedAt = reader.has("startedAt") ? ((try? reader.int64("startedAt")) ?? 0) : 0
        endedAt = reader.has("endedAt") ? (try? reader.int64("endedAt")) : nil
        flight = json["flight"].flatMap { try? FlightData(json: $0) }
        health = json["health"].flatMap { try? HealthData(json: $0) }
        summary = json["summary"].flatMap { try? WorkoutSummary(json: $0) }
        elapsedTime = (try? reader.optionalDouble("elapsedTime")) ?? flight?.elapsedTime ?? 0
    }

    public static func decode(_ bytes: some Collection<UInt8>) throws(Rejection) -> WorkoutSnapshot {
        let json: JSON
        do throws(JSONParseError) {
            json = try JSON.parse(bytes)
        } catch {
            throw .invalid(error.description)
        }
        return try WorkoutSnapshot(json: json)
    }
}
