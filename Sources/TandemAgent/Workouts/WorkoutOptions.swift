import TandemCore

/// What `tandem-agent workout` was asked to do.
public struct WorkoutOptions: Sendable {
    public var device: Device
    public var startOrigin: StartOrigin
    public var workoutId: String
    /// Sent with `start` when given; the coordinator's default is standalone.
    public var mode: WorkoutMode?
    /// The track to replay (local only); nil: the built-in demo route.
    public var route: [GPSFix]?
    /// Send stop after this many seconds of running.
    public var duration: Double?
    public var targetPace: Double?

    /// (The interval between published flight samples is the client's:
    /// ``AgentConfiguration/flightInterval``.)
    public init(device: Device, startOrigin: StartOrigin, workoutId: String, mode: WorkoutMode? = nil, route: [GPSFix]? = nil,
                duration: Double? = nil, targetPace: Double? = nil) {
        self.device = device
        self.startOrigin = startOrigin
        self.workoutId = workoutId
        self.mode = mode
        self.route = route
        self.duration = duration
        self.targetPace = targetPace
    }
}

/// Replays a track in wall-clock time: fix times are shifted so the first fix is at the
/// moment replay starts, and each tick hands over the fixes whose time has come.
public struct RouteReplay: Sendable {
    public let fixes: [GPSFix]
    public private(set) var next = 0
    private var offset: Millis = 0

    public init(fixes: [GPSFix]) {
        self.fixes = fixes
    }

    public mutating func start(at now: Millis) {
        offset = now - (fixes.first?.time ?? now)
        next = 0
    }

    /// The fixes due by `now`, times shifted to the wall clock.
    public mutating func due(at now: Millis) -> [GPSFix] {
        var out: [GPSFix] = []
        while next < fixes.count, fixes[next].time + offset <= now {
            let f = fixes[next]
            out.append(GPSFix(time: f.time + offset, latitude: f.latitude, longitude: f.longitude, altitude: f.altitude))
            next += 1
        }
        return out
    }

    public var isFinished: Bool { next >= fixes.count }
}
