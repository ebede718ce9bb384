/// One position from a GPS receiver (or a GPX track point).
public struct GPSFix: Sendable, Equatable {
    /// Milliseconds since the Unix epoch.
    public let time: Millis
    /// Degrees, -90...90.
    public let latitude: Double
    /// Degrees, -180...180.
    public let longitude: Double
    /// Metres above sea level.
    public let altitude: Double

    public init(time: Millis, latitude: Double, longitude: Double, altitude: Double = 0) {
        self.time = time
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
    }
}
