/// One workout of one user, mirrored between phone and watch (CONTRACT "Workouts").
///
/// A workout that does not exist yet has no state: the coordinator holds a
/// `WorkoutState?` and goes through the static `apply(_:from:to:...)` functions, which
/// create the state on the first accepted `start`. "Two starts race: the earlier
/// timestamp wins" comes from the coordinator's reorder buffer applying controls in
/// timestamp order; the later start then gets `already_started` here.
public struct WorkoutState: Sendable, Equatable {
    public let user: String
    public let workoutId: String
    public private(set) var status: WorkoutStatus
    public let mode: WorkoutMode
    /// The device that started the workout: it alone publishes flight data.
    public let origin: Device
    public let startedAt: Millis
    /// The stop's timestamp; set exactly when finished.
    public private(set) var endedAt: Millis?
    /// The last accepted flight sample.
    public private(set) var flight: FlightData?
    /// The newest accepted health sample.
    public private(set) var health: HealthData?
    public private(set) var heartRate: HeartRateStatistics
    /// 1 after the start; bumped by every accepted control, flight or health sample.
    public private(set) var version: Int64

    public init(
        user: String, workoutId: String, status: WorkoutStatus, mode: WorkoutMode, origin: Device,
        startedAt: Millis, endedAt: Millis? = nil, flight: FlightData? = nil, health: HealthData? = nil,
        heartRate: HeartRateStatistics = HeartRateStatistics(), version: Int64
    ) {
        self.user = user
        self.workoutId = workoutId
        self.status = status
        self.mode = mode
        self.origin = origin
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.flight = flight
        self.health = health
        self.heartRate = heartRate
        self.version = version
    }

    /// The state a start from `device` creates: running, origin `device`, version 1.
    public static func started(user: String, workoutId: String, by control: WorkoutControl, from device: Device) -> WorkoutState {
        WorkoutState(
            user: user, workoutId: workoutId, status: .running, mode: control.mode ?? .standalone,
            origin: device, startedAt: control.timestamp, version: 1
        )
    }

    /// How `device` relates to this workout: `local` on the origin, `remote` on the other.
    public func startOrigin(of device: Device) -> StartOrigin { StartOrigin(device: device, origin: origin) }

    /// The summary the logbook keeps; nil until finished.
    public var summary: WorkoutSummary? {
        status == .finished ? WorkoutSummary(lastFlight: flight, heartRate: heartRate) : nil
    }

    /// The snapshot's `elapsedTime`: the last accepted flight's, 0 without one.
    public var elapsedTime: Double { flight?.elapsedTime ?? 0 }

    // MARK: Workouts that may not exist yet

    /// Applies a control to a workout that may not exist: a start creates it; pause and
    /// stop get `not_running`, resume `not_paused`, with no version.
    public static func apply(
        _ control: WorkoutControl, from device: Device, to state: inout WorkoutState?, user: String, workoutId: String
    ) -> WorkoutOutcome {
        guard var existing = state else {
            switch control.type {
            case .start:
                state = started(user: user, workoutId: workoutId, by: control, from: device)
                return WorkoutOutcome(rejection: nil, version: 1, statusChanged: true)
            case .pause, .stop:
                return .rejected(.notRunning, "workout \(workoutId) has not started", version: nil)
            case .resume:
                return .rejected(.notPaused, "workout \(workoutId) has not started", version: nil)
            }
        }
        let outcome = existing.apply(control: control, from: device)
        state = existing
        return outcome
    }

    /// Applies a flight sample to a workout that may not exist (`not_running` if not).
    public static func apply(flight: FlightData, from device: Device, to state: inout WorkoutState?) -> WorkoutOutcome {
        guard var existing = state else {
            return .rejected(.notRunning, "the workout has not started", version: nil)
        }
        let outcome = existing.apply(flight: flight, from: device)
        state = existing
        return outcome
    }

    /// Applies a health sample to a workout that may not exist (`watch_only` from the
    /// phone, else `not_running`).
    public static func apply(health: HealthData, from device: Device, to state: inout WorkoutState?) -> WorkoutOutcome {
        guard var existing = state else {
            if device != .watch {
                return .rejected(.watchOnly, "health data comes from the watch only", version: nil)
            }
            return .rejected(.notRunning, "the workout has not started", version: nil)
        }
        let outcome = existing.apply(health: health, from: device)
        state = existing
        return outcome
    }

    // MARK: Rules for an existing workout

    /// start: `already_started`; pause: running -> paused; resume: paused -> running;
    /// stop (either device): running or paused -> finished. Pause and resume are taken
    /// from either device too.
    public mutating func apply(control: WorkoutControl, from device: Device) -> WorkoutOutcome {
        switch control.type {
        case .start:
            return .rejected(.alreadyStarted, "workout \(workoutId) was already started; a workout id runs once", version: version)
        case .pause:
            guard status == .running else {
                return .rejected(.notRunning, "workout \(workoutId) is \(status.rawValue), not running", version: version)
            }
            return change(to: .paused)
        case .resume:
            guard status == .paused else {
                return .rejected(.notPaused, "workout \(workoutId) is \(status.rawValue), not paused", version: version)
            }
            return change(to: .running)
        case .stop:
            guard status == .running || status == .paused else {
                return .rejected(.notRunning, "workout \(workoutId) is already finished", version: version)
            }
            endedAt = control.timestamp
            return change(to: .finished)
        }
    }

    /// Accepted only from the origin device (`not_origin`), while running
    /// (`not_running`), and newer than the last accepted flight (`stale`).
    public mutating func apply(flight sample: FlightData, from device: Device) -> WorkoutOutcome {
        guard device == origin else {
            return .rejected(.notOrigin, "flight data comes from the origin device (\(origin.rawValue)), not the \(device.rawValue)", version: version)
        }
        guard status == .running else {
            return .rejected(.notRunning, "workout \(workoutId) is \(status.rawValue), not running", version: version)
        }
        if let last = flight, sample.timestamp <= last.timestamp {
            return .rejected(.stale, "flight at \(sample.timestamp) is not newer than the last accepted one at \(last.timestamp)", version: version)
        }
        flight = sample
        version += 1
        return WorkoutOutcome(rejection: nil, version: version, statusChanged: false)
    }

    /// Accepted only from the watch (`watch_only`), whichever device is origin, while
    /// running (`not_running`). Every accepted heart rate counts in the statistics; the
    /// state shows the newest sample by timestamp.
    public mutating func apply(health sample: HealthData, from device: Device) -> WorkoutOutcome {
        guard device == .watch else {
            return .rejected(.watchOnly, "health data comes from the watch only", version: version)
        }
        guard status == .running else {
            return .rejected(.notRunning, "workout \(workoutId) is \(status.rawValue), not running", version: version)
        }
        heartRate = heartRate.adding(sample.heartRate)
        if health.map({ sample.timestamp >= $0.timestamp }) ?? true {
            health = sample
        }
        version += 1
        return WorkoutOutcome(rejection: nil, version: version, statusChanged: false)
    }

    private mutating func change(to next: WorkoutStatus) -> WorkoutOutcome {
        status = next
        version += 1
        return WorkoutOutcome(rejection: nil, version: version, statusChanged: true)
    }
}
