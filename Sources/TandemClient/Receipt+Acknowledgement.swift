import TandemCore

extension Receipt {
    /// Whether the coordinator has taken the event or command (a duplicate was taken
    /// before).
    public var isAcknowledgement: Bool { status != .rejected }
}
