/// What applying one control or telemetry sample to a workout did.
public struct WorkoutOutcome: Sendable, Equatable {
    /// Nil when accepted.
    public let rejection: Rejection?
    /// After the sample when accepted, else the current version; nil when the workout
    /// does not exist.
    public let version: Int64?
    /// The status changed (start, pause, resume, stop): publish the snapshot at once
    /// rather than throttled, and on `finished` store the summary.
    public let statusChanged: Bool

    public init(rejection: Rejection?, version: Int64?, statusChanged: Bool) {
        self.rejection = rejection
        self.version = version
        self.statusChanged = statusChanged
    }

    static func rejected(_ code: ReceiptCode, _ message: String, version: Int64?) -> WorkoutOutcome {
        WorkoutOutcome(rejection: Rejection(code, message), version: version, statusChanged: false)
    }

    public var isAccepted: Bool { rejection == nil }

    /// The receipt under `id` (a commandId, or `flight:<ts>` / `health:<ts>`; telemetry
    /// gets a receipt only when rejected).
    public func receipt(id: String) -> Receipt {
        if let rejection {
            return .rejected(id: id, kind: .workout, rejection, version: version)
        }
        return .accepted(id: id, kind: .workout, version: version)
    }
}
