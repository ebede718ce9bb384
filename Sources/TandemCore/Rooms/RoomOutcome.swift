/// What applying one edit event to a room did: the change it made, or why it was refused.
/// Either way it carries the version a receipt reports.
public enum RoomOutcome: Sendable, Equatable {
    case accepted(RoomChange)
    /// `version` is the room's current version, nil when the room does not exist yet.
    case rejected(Rejection, version: Int64?)

    /// The receipt's `version`: after the event if accepted, else the current one (nil
    /// when the room does not exist yet).
    public var version: Int64? {
        switch self {
        case .accepted(let change): change.version
        case .rejected(_, let version): version
        }
    }

    public var change: RoomChange? {
        if case .accepted(let change) = self { return change }
        return nil
    }

    public var rejection: Rejection? {
        if case .rejected(let rejection, _) = self { return rejection }
        return nil
    }

    public var isAccepted: Bool { change != nil }

    /// The receipt for the event with this id.
    public func receipt(id: String) -> Receipt {
        switch self {
        case .accepted(let change): .accepted(id: id, kind: .room, version: change.version)
        case .rejected(let rejection, let version): .rejected(id: id, kind: .room, rejection, version: version)
        }
    }
}
