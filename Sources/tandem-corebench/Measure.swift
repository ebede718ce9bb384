#if canImport(Glibc)
import Glibc
#endif

/// Timing for in-process benchmarks. The machine is shared, so every figure is given
/// twice: per second of wall time and per second of this thread's CPU time (which the
/// other processes on the box cannot inflate); the best of several runs is reported.
struct Measurement {
    var name: String
    var operations: Int
    var wallSeconds: Double
    var cpuSeconds: Double

    var perWallSecond: Double { Double(operations) / wallSeconds }
    var perCPUSecond: Double { Double(operations) / cpuSeconds }
    var nanosPerOperation: Double { cpuSeconds * 1e9 / Double(operations) }
}

enum Clock {
    static func seconds(_ clock: clockid_t) -> Double {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
    static var wall: Double { seconds(CLOCK_MONOTONIC) }
    static var threadCPU: Double { seconds(CLOCK_THREAD_CPUTIME_ID) }
}

/// Runs `body` (which returns how many operations it did) `repeats` times after
/// `setup`, and keeps the run with the least CPU time.
func measure(_ name: String, repeats: Int, setup: () -> Void = {}, _ body: () -> Int) -> Measurement {
    var best: Measurement?
    for _ in 0..<repeats {
        setup()
        let wall0 = Clock.wall, cpu0 = Clock.threadCPU
        let ops = body()
        let m = Measurement(name: name, operations: ops, wallSeconds: Clock.wall - wall0, cpuSeconds: Clock.threadCPU - cpu0)
        if best == nil || m.cpuSeconds / Double(m.operations) < best!.cpuSeconds / Double(best!.operations) { best = m }
    }
    return best!
}

/// Keeps a value alive so the optimiser cannot drop the work that made it.
@inline(never) func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}
