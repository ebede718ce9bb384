import Foundation
import TandemCore
import TandemEngine

/// The coordinator's two clocks (``Engine/Now``): the wall clock for times of day on the
/// wire, and a tick for deadlines that is monotonic (`CLOCK_MONOTONIC`: never stepped by
/// NTP, an operator or a virtual machine's resume) and reads like the wall clock did when
/// this clock was made, so that deadlines kept in the store (lock leases) mean the same
/// after a restart.
public struct CoordinatorClock: Sendable {
    let anchorWall: Millis
    /// `CLOCK_MONOTONIC` when this clock was made, in nanoseconds.
    let anchorMonotonic: Int64

    public init() {
        anchorWall = WallClock.now()
        anchorMonotonic = Self.monotonicNanoseconds()
    }

    public func now() -> Engine.Now {
        Engine.Now(wall: WallClock.now(), tick: tick())
    }

    /// The deadline clock alone, in whole milliseconds.
    public func tick() -> Millis {
        anchorWall + (Self.monotonicNanoseconds() - anchorMonotonic) / 1_000_000
    }

    /// The tick at which `instant` of the continuous clock falls (a lease's deadline).
    public func tick(at instant: ContinuousClock.Instant) -> Millis {
        tick() + (instant - ContinuousClock.now).roundedMillis
    }

    /// How long until the tick reads `tick`, to the nanosecond: a timer that slept in
    /// whole milliseconds would wake up to a millisecond late.
    public func duration(until tick: Millis) -> Duration {
        let target = anchorMonotonic + (tick - anchorWall) * 1_000_000
        return .nanoseconds(max(0, target - Self.monotonicNanoseconds()))
    }

    static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
