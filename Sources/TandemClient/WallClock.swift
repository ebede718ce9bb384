#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TandemCore

/// The agent's wall clock, in the contract's milliseconds since the Unix epoch.
public enum WallClock {
    public static func now() -> Millis {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Millis(ts.tv_sec) * 1_000 + Millis(ts.tv_nsec) / 1_000_000
    }
}
