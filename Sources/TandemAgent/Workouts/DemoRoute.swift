import TandemCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A built-in route for when no GPX file is given: one lap of a circular loop, as GPS
/// fixes at 1 Hz at a running pace that drifts gently around the mean.
public enum DemoRoute {
    /// The loop's centre (a park in London) — any open ground would do.
    public static let centre = (latitude: 51.5073, longitude: -0.1657)

    /// Fixes from `start`, one per second, over `laps` laps of a `lapLength`-metre loop
    /// run at about `pace` seconds per km (±4% over a two-minute cycle), with altitude
    /// rolling 5 m around 30 m.
    public static func fixes(start: Millis, lapLength: Double = 3_000, pace: Double = 330, laps: Int = 1) -> [GPSFix] {
        precondition(lapLength > 0 && pace > 0 && laps > 0, "a demo route needs a positive length, pace and lap count")
        let radius = lapLength / (2 * .pi)
        let meanSpeed = 1_000 / pace
        let total = lapLength * Double(laps)
        var fixes: [GPSFix] = []
        var covered = 0.0
        var second: Int64 = 0
        while true {
            let angle = covered / radius  // radians around the loop, clockwise from north
            let position = Geodesy.destination(
                fromLatitude: centre.latitude, longitude: centre.longitude,
                bearing: angle * 180 / .pi, metres: radius
            )
            fixes.append(GPSFix(time: start + second * 1_000, latitude: position.latitude, longitude: position.longitude, altitude: 30 + 5 * sin(angle)))
            if covered >= total { break }
            let speed = meanSpeed * (1 + 0.04 * sin(Double(second) * 2 * .pi / 120))
            covered = min(total, covered + speed)
            second += 1
        }
        return fixes
    }
}
