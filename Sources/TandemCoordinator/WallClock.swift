import Foundation
import TandemCore

/// The wall clock: milliseconds since the Unix epoch, as on the wire.
public enum WallClock {
    public static func now() -> Millis {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Millis(ts.tv_sec) * 1000 + Millis(ts.tv_nsec / 1_000_000)
    }
}

/// The coordinator's two clocks (``Engine/Now``): the wall clock for times of day on the
/// wire, and a tick for deadlines that is monotonic (`CLOCK_MONOTONIC`: never stepped by
/// NTP, an operator or a virtual machine's resume) and reads like the wall clock did when
/// this clock was made, so that deadlines kept in the store (lock leases) mean the same
/// after a restart.
public struct CoordinatorClock: Sendable {
    let anchorWall: Millis
    let anchorMonotonic: Millis

    public init() {
        anchorWall = WallClock.now()
        anchorMonotonic = Self.monotonic()
    }

    public func now() -> Engine.Now {
        Engine.Now(wall: WallClock.now(), tick: tick())
    }

    /// The deadline clock alone.
    public func tick() -> Millis {
        anchorWall + (Self.monotonic() - anchorMonotonic)
    }

    static func monotonic() -> Millis {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Millis(ts.tv_sec) * 1000 + Millis(ts.tv_nsec / 1_000_000)
    }
}
