import TandemCore

/// Plausible, deterministic health data for a simulated watch.
///
/// Heart rate starts at 90 bpm (rest) and moves toward a target set by the pace —
/// 140 bpm at 6:40 /km (2.5 m/s) rising 17.5 bpm per m/s, kept in 130-178 — with a lag of
/// about 30 s and ±1.5 bpm of noise; standing still (pace 0) the target is 90. Cadence
/// is 150-185 steps per minute when moving (faster with speed, ±2 noise), 0 standing.
/// Active energy accumulates at 0.0022 kcal per second per bpm above 70 (about 10 kcal a
/// minute at 150 bpm). The same seed and inputs always give the same samples.
public struct HealthSimulator: Sendable {
    public static let restingHeartRate = 90.0

    private var random: SplitMix64
    private var heartRate = HealthSimulator.restingHeartRate
    private var activeEnergy = 0.0
    private var lastTime: Millis?

    public init(seed: UInt64) {
        random = SplitMix64(seed: seed)
    }

    /// The sample at `time` for a runner at `pace` seconds per km (0: standing still).
    public mutating func sample(at time: Millis, pace: Double) -> HealthData {
        let seconds = lastTime.map { Double(max(0, time - $0)) / 1_000 } ?? 0
        lastTime = time
        let speed = pace > 0 ? 1_000 / pace : 0
        let moving = speed >= FlightComputer.standingSpeed
        let target = moving ? min(178, max(130, 140 + (speed - 2.5) * 17.5)) : Self.restingHeartRate
        heartRate += (target - heartRate) * min(1, seconds / 30) + random.next(in: -1.5...1.5)
        heartRate = min(200, max(50, heartRate))
        activeEnergy += max(0, heartRate - 70) * 0.0022 * seconds
        let cadence = moving ? min(185, max(150, 150 + (speed - 2.5) * 17.5)) + random.next(in: -2...2) : 0
        return HealthData(
            timestamp: time,
            heartRate: heartRate.rounded(),
            cadence: max(0, cadence.rounded()),
            activeEnergy: (activeEnergy * 10).rounded() / 10
        )
    }
}
