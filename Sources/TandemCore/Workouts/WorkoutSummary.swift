/// What the logbook keeps of a finished workout (CONTRACT "Workouts", summary).
public struct WorkoutSummary: Sendable, Equatable {
    /// Metres, from the last accepted flight (0 without one).
    public let distance: Double
    /// Seconds, from the last accepted flight (0 without one).
    public let elapsedTime: Double
    /// Seconds per km: elapsedTime / (distance / 1000); nil when distance is 0.
    public let averagePace: Double?
    /// Mean of the accepted heart rates; nil without any.
    public let averageHeartRate: Double?
    /// Maximum of the accepted heart rates; nil without any.
    public let maxHeartRate: Double?

    public init(distance: Double, elapsedTime: Double, averagePace: Double?, averageHeartRate: Double?, maxHeartRate: Double?) {
        self.distance = distance
        self.elapsedTime = elapsedTime
        self.averagePace = averagePace
        self.averageHeartRate = averageHeartRate
        self.maxHeartRate = maxHeartRate
    }

    /// The contract's summary of a workout whose last accepted flight is `flight`.
    public init(lastFlight flight: FlightData?, heartRate: HeartRateStatistics) {
        let distance = flight?.distance ?? 0
        let elapsedTime = flight?.elapsedTime ?? 0
        self.init(
            distance: distance,
            elapsedTime: elapsedTime,
            averagePace: distance > 0 ? elapsedTime / (distance / 1000) : nil,
            averageHeartRate: heartRate.mean,
            maxHeartRate: heartRate.maximum
        )
    }

    public var json: JSON {
        .obj([
            "distance": .double(distance),
            "elapsedTime": .double(elapsedTime),
            "averagePace": JSON(averagePace),
            "averageHeartRate": JSON(averageHeartRate),
            "maxHeartRate": JSON(maxHeartRate),
        ])
    }

    /// Reads the wire form; missing numbers are 0 (distance, elapsedTime) or null.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("summary must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        distance = try reader.optionalDouble("distance") ?? 0
        elapsedTime = try reader.optionalDouble("elapsedTime") ?? 0
        averagePace = try reader.optionalDouble("averagePace")
        averageHeartRate = try reader.optionalDouble("averageHeartRate")
        maxHeartRate = try reader.optionalDouble("maxHeartRate")
    }
}
