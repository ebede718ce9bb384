import TandemCore

/// Where a member's pointer is over a room's photo, in the photo's pixels (CONTRACT "Room
/// history, restore and cursors"). Finite numbers only.
public struct CursorPosition: Sendable, Equatable {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    /// The payload on `rooms/{roomId}/cursors/{userId}`: `{"x","y"}` for a position,
    /// `{}` for nil (the pointer left the photo).
    public static func payload(_ position: CursorPosition?) -> [UInt8] {
        guard let position else { return JSON.object([]).serialized() }
        return JSON.object([.init("x", .double(position.x)), .init("y", .double(position.y))]).serialized()
    }

    /// Reads a cursor payload: `.some(position)` for `{"x","y"}` (finite numbers; other
    /// keys ignored), `.some(nil)` for `{}` (the pointer left), nil for anything else (not
    /// an object, one coordinate without the other, a coordinate that is not a finite
    /// number): a malformed cursor is ignored, not guessed at.
    public static func decode(_ bytes: [UInt8]) -> CursorPosition?? {
        guard let json = try? JSON.parse(bytes), case .object = json else { return nil }
        let x = json["x"], y = json["y"]
        if x == nil, y == nil { return .some(nil) }
        guard let x = x?.doubleValue, let y = y?.doubleValue, x.isFinite, y.isFinite else { return nil }
        return .some(CursorPosition(x: x, y: y))
    }
}

/// One member's cursor as ``TandemClient/cursors(room:)`` hands it on.
public struct RoomCursor: Sendable, Equatable {
    /// The member whose pointer it is (the topic's `{userId}` level).
    public var userId: String
    /// nil: the pointer left the photo.
    public var position: CursorPosition?

    public init(userId: String, position: CursorPosition?) {
        self.userId = userId
        self.position = position
    }
}

/// The pace of one room's outgoing cursor, without I/O: at most one message every
/// ``interval`` (20 a second by default, the contract's most), and the last position
/// offered always goes out, so a burst of moves never loses where the pointer stopped
/// (nor a `{}` offered right after a move).
///
/// The caller offers each new position with the time on a monotonic clock; the answer
/// says to send it now, or when to come back (``flush(at:)``) for whatever is latest then.
public struct CursorThrottle: Sendable, Equatable {
    public enum Decision: Sendable, Equatable {
        /// Send this now.
        case send(CursorPosition?)
        /// Held: call ``CursorThrottle/flush(at:)`` at this time to send the latest.
        case wait(until: Duration)
        /// Held behind a flush already asked for; it will carry this one.
        case held
    }

    /// The least time between two messages.
    public let interval: Duration
    /// When the last message went.
    public private(set) var lastSent: Duration?
    /// The latest position offered and not sent yet (`.some(nil)`: a `{}` waits).
    public private(set) var waiting: CursorPosition??
    /// A flush was asked for and has not come yet.
    public private(set) var flushDue: Duration?
    /// The last message sent said the pointer is over the photo (a `{}` is owed when
    /// the client leaves).
    public private(set) var shown = false

    public init(interval: Duration = .milliseconds(50)) {
        self.interval = interval
    }

    /// A new position (nil: the pointer left) at `now`.
    public mutating func offer(_ position: CursorPosition?, at now: Duration) -> Decision {
        if flushDue != nil {
            waiting = .some(position)
            return .held
        }
        if let lastSent, now < lastSent + interval {
            waiting = .some(position)
            flushDue = lastSent + interval
            return .wait(until: lastSent + interval)
        }
        sent(position, at: now)
        return .send(position)
    }

    /// The flush asked for by ``offer(_:at:)``: the latest position to send now, if any
    /// (`.some(nil)`: send `{}`), or nil when it is early (a clock that jumped back:
    /// the answer to wait again is in ``flushDue``).
    public mutating func flush(at now: Duration) -> CursorPosition?? {
        guard let due = flushDue else { return nil }
        if now < due { return nil }
        flushDue = nil
        guard let position = waiting else { return nil }
        waiting = nil
        sent(position, at: now)
        return .some(position)
    }

    private mutating func sent(_ position: CursorPosition?, at now: Duration) {
        lastSent = now
        shown = position != nil
    }
}
