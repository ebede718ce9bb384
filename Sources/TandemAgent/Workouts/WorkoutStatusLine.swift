import TandemCore

/// What a device shows while a workout runs, as one line:
/// `watch local running  12:34  2.41 km  5:12 /km  normal  HR 142`.
public struct WorkoutStatusLine: Sendable, Equatable {
    public var device: Device
    public var startOrigin: StartOrigin
    public var status: WorkoutStatus?
    public var elapsed: Double
    public var distance: Double
    /// Seconds per km; 0 or nil: not known.
    public var pace: Double?
    public var alert: GPWSStatus
    public var heartRate: Double?

    public init(device: Device, startOrigin: StartOrigin, status: WorkoutStatus?, elapsed: Double, distance: Double,
                pace: Double?, alert: GPWSStatus, heartRate: Double?) {
        self.device = device
        self.startOrigin = startOrigin
        self.status = status
        self.elapsed = elapsed
        self.distance = distance
        self.pace = pace
        self.alert = alert
        self.heartRate = heartRate
    }

    public var text: String {
        let status = self.status?.rawValue ?? "waiting"
        let hr = heartRate.map { "HR \(Format.number($0.rounded()))" } ?? "HR --"
        return "\(device.rawValue) \(startOrigin.rawValue) \(status)  \(Format.duration(elapsed))  \(Format.distance(distance))  \(Format.pace(pace))  \(alert.rawValue)  \(hr)"
    }

    public var json: JSON {
        .obj([
            "type": "status",
            "device": .string(device.rawValue),
            "startOrigin": .string(startOrigin.rawValue),
            "status": status.map { .string($0.rawValue) } ?? .null,
            "elapsedTime": .double((elapsed * 10).rounded() / 10),
            "distance": .double(distance),
            "pace": JSON(pace),
            "gpwsStatus": .string(alert.rawValue),
            "heartRate": JSON(heartRate),
        ])
    }
}

extension WorkoutSummary {
    /// `2.41 km in 12:34, average pace 5:12 /km, heart rate 142 average, 160 max`.
    public var text: String {
        var parts = ["\(Format.distance(distance)) in \(Format.duration(elapsedTime))", "average pace \(Format.pace(averagePace))"]
        if let averageHeartRate, let maxHeartRate {
            parts.append("heart rate \(Format.number(averageHeartRate.rounded())) average, \(Format.number(maxHeartRate.rounded())) max")
        } else {
            parts.append("no heart rate")
        }
        return parts.joined(separator: ", ")
    }
}
