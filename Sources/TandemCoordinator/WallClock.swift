import Foundation
import TandemCore

/// The coordinator's clock: milliseconds since the Unix epoch, as on the wire.
public enum WallClock {
    public static func now() -> Millis {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Millis(ts.tv_sec) * 1000 + Millis(ts.tv_nsec / 1_000_000)
    }
}
