#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The wall clock, in the contract's milliseconds since the Unix epoch: what goes on the
/// wire as a time of day (timestamps, `updatedAt`, `sentAt`). The one wall clock of the
/// package: clients, agents, tandem-web and the coordinator read it (the coordinator's
/// deadlines run on a monotonic tick beside it: `CoordinatorClock`).
public enum WallClock {
    public static func now() -> Millis {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Millis(ts.tv_sec) * 1_000 + Millis(ts.tv_nsec) / 1_000_000
    }
}
