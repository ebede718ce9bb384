/// Turns GPS fixes into FlightData on the origin device.
///
/// - distance: the sum of haversine great-circle steps between consecutive fixes taken
///   while running (Earth radius 6,371,000 m).
/// - elapsedTime: running time in seconds, pauses excluded. A segment runs from the first
///   fix (or `resume(at:)`) to `pause(at:)`; fixes during a pause are ignored, and the
///   first fix after a resume only anchors the position, so ground covered while paused
///   is not counted.
/// - pace: seconds per km over the last `paceWindow` seconds of running (elapsedTime
///   and distance both exclude pauses, so the window spans movement only). Slower than
///   `standingSpeed` over that window counts as standing still: pace 0, "unknown".
/// - heading: the bearing from the most recent fix at least `headingBaseline` metres
///   behind the current one (so GPS jitter while nearly still does not spin it); it
///   keeps its last value when no fix is that far back.
/// - gpwsStatus: normal without a target pace or with an unknown pace; `caution` when
///   more than 5% slower than the target, `warning` when more than 15% slower.
public struct FlightComputer: Sendable {
    /// Seconds of running the pace is averaged over.
    public static let paceWindow = 30.0
    /// Metres per second below which the runner is taken as standing still.
    public static let standingSpeed = 0.5
    /// Metres back along the track the heading is measured from.
    public static let headingBaseline = 10.0
    /// Pace at or below target × this is normal; above it, caution.
    public static let cautionRatio = 1.05
    /// Pace above target × this is a warning.
    public static let warningRatio = 1.15

    /// Whether fixes are being counted.
    public enum Phase: Sendable, Equatable {
        case running
        case paused
    }

    private struct Sample: Sendable {
        let elapsed: Double
        let distance: Double
        let fix: GPSFix
        let segment: Int
    }

    /// Seconds per km to hold; nil: gpwsStatus is always normal.
    public var targetPace: Double?
    public private(set) var phase: Phase = .running
    /// Metres covered while running.
    public private(set) var distance: Double = 0
    /// Degrees clockwise from north.
    public private(set) var heading: Double = 0
    /// The data of the last fix taken.
    public private(set) var current: FlightData?

    /// Running milliseconds of the segments already closed by a pause.
    private var closedSegments: Millis = 0
    /// Where the current running segment began; nil before the first fix.
    private var segmentStart: Millis?
    /// The last fix taken in this segment; nil right after a resume.
    private var anchor: GPSFix?
    /// The time of the last fix taken, in any segment.
    private var lastTime: Millis?
    /// Recent samples, oldest first, covering at least the pace window.
    private var window: [Sample] = []
    /// Counts running segments, so the heading never looks back across a pause.
    private var segment = 0

    public init(targetPace: Double? = nil) {
        self.targetPace = targetPace
    }

    /// Running seconds at `time` (pauses excluded).
    public func elapsedTime(at time: Millis) -> Double {
        var total = closedSegments
        if phase == .running, let segmentStart { total += max(0, time - segmentStart) }
        return Double(total) / 1000
    }

    /// Takes one fix. Returns its FlightData, or nil when the fix was not counted:
    /// during a pause, or not newer than the last fix taken (or the resume).
    public mutating func add(_ fix: GPSFix) -> FlightData? {
        guard phase == .running else { return nil }
        if let lastTime, fix.time <= lastTime { return nil }
        if let segmentStart, fix.time < segmentStart { return nil }
        if segmentStart == nil { segmentStart = fix.time }
        if let anchor { distance += Geodesy.distance(from: anchor, to: fix) }
        anchor = fix
        lastTime = fix.time

        let elapsed = elapsedTime(at: fix.time)
        window.append(Sample(elapsed: elapsed, distance: distance, fix: fix, segment: segment))
        // Keep the newest sample at or before the window's start, so the window is full.
        while window.count > 2, window[1].elapsed <= elapsed - Self.paceWindow { window.removeFirst() }

        updateHeading(to: fix)
        let pace = currentPace()
        let data = FlightData(
            timestamp: fix.time, elapsedTime: elapsed, distance: distance, pace: pace,
            altitude: fix.altitude, heading: heading,
            gpwsStatus: Self.gpwsStatus(pace: pace, target: targetPace),
            latitude: fix.latitude, longitude: fix.longitude
        )
        current = data
        return data
    }

    /// Stops counting at `time` (clamped to no earlier than the last fix taken).
    public mutating func pause(at time: Millis) {
        guard phase == .running else { return }
        if let segmentStart {
            let end = max(time, lastTime ?? time, segmentStart)
            closedSegments += end - segmentStart
        }
        segmentStart = nil
        phase = .paused
    }

    /// Counts again from `time`; the next fix anchors the position without adding distance.
    public mutating func resume(at time: Millis) {
        guard phase == .paused else { return }
        segmentStart = max(time, lastTime ?? time)
        anchor = nil
        segment += 1
        phase = .running
    }

    /// The pace warning for `pace` against `target` (both s/km; pace 0 = unknown).
    public static func gpwsStatus(pace: Double, target: Double?) -> GPWSStatus {
        guard let target, target > 0, pace > 0 else { return .normal }
        if pace > target * warningRatio { return .warning }
        if pace > target * cautionRatio { return .caution }
        return .normal
    }

    private func currentPace() -> Double {
        guard let first = window.first, let last = window.last else { return 0 }
        let seconds = last.elapsed - first.elapsed
        let metres = last.distance - first.distance
        guard seconds > 0, metres / seconds >= Self.standingSpeed else { return 0 }
        return seconds / (metres / 1000)
    }

    private mutating func updateHeading(to fix: GPSFix) {
        for sample in window.reversed() where sample.segment == segment && Geodesy.distance(from: sample.fix, to: fix) >= Self.headingBaseline {
            heading = Geodesy.bearing(from: sample.fix, to: fix)
            return
        }
    }
}
