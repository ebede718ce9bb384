/// Running statistics of the accepted heart rates of a workout, enough for the summary's
/// mean and maximum without keeping every sample.
public struct HeartRateStatistics: Sendable, Equatable {
    public let count: Int
    public let sum: Double
    /// Nil until a heart rate was accepted.
    public let maximum: Double?

    public init(count: Int = 0, sum: Double = 0, maximum: Double? = nil) {
        self.count = count
        self.sum = sum
        self.maximum = maximum
    }

    /// The mean, nil without samples.
    public var mean: Double? { count > 0 ? sum / Double(count) : nil }

    /// These statistics with one more sample.
    public func adding(_ heartRate: Double) -> HeartRateStatistics {
        HeartRateStatistics(count: count + 1, sum: sum + heartRate, maximum: Swift.max(maximum ?? heartRate, heartRate))
    }
}
