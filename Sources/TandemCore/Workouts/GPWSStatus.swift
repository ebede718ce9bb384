/// The pace warning carried by FlightData: how far behind a target pace the runner is.
public enum GPWSStatus: String, Sendable, CaseIterable {
    case normal, caution, warning
}
