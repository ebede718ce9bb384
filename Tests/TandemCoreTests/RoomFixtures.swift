@testable import TandemCore

/// Builders shared by the room tests.
enum Fixture {
    static let frame = Frame(x: 10, y: 20, width: 100, height: 50)
    static let lease: Millis = 30_000

    static func event(_ type: EditEvent.Kind, _ stickerId: String, id: String, at timestamp: Millis = 1_000, frame: Frame? = nil, image: String? = nil) -> EditEvent {
        switch type {
        case .create:
            EditEvent(eventId: id, type: type, stickerId: stickerId, timestamp: timestamp, image: image ?? "star.png", frame: frame ?? Fixture.frame)
        case .update:
            EditEvent(eventId: id, type: type, stickerId: stickerId, timestamp: timestamp, image: image, frame: frame ?? Frame(x: 1, y: 2, width: 3, height: 4))
        default:
            EditEvent(eventId: id, type: type, stickerId: stickerId, timestamp: timestamp)
        }
    }
}

extension RoomState {
    /// Applies an event that the test expects to be accepted.
    @discardableResult
    mutating func must(_ type: EditEvent.Kind, _ stickerId: String, by user: String, now: Millis = 1_000, id: String? = nil) -> RoomChange? {
        let event = Fixture.event(type, stickerId, id: id ?? "\(type)-\(stickerId)-\(version)", at: now)
        return apply(event, from: user, now: now, lease: Fixture.lease).change
    }
}
