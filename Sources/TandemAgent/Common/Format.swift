#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TandemCore

/// How agents write times, durations, distances and paces for people.
public enum Format {
    /// `2026-11-21 14:03:07` in the local time zone.
    public static func dateTime(_ millis: Millis) -> String {
        var seconds = time_t(millis / 1_000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        return "\(parts.tm_year + 1900)-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday)) \(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec))"
    }

    /// `14:03:07` in the local time zone.
    public static func time(_ millis: Millis) -> String {
        String(dateTime(millis).suffix(8))
    }

    /// Seconds as `M:SS`, or `H:MM:SS` from an hour.
    public static func duration(_ seconds: Double) -> String {
        let total = Int(max(0, seconds.isFinite ? seconds : 0))
        let h = total / 3_600, m = total / 60 % 60, s = total % 60
        return h > 0 ? "\(h):\(pad(m)):\(pad(s))" : "\(m):\(pad(s))"
    }

    /// Metres as `0.00 km`.
    public static func distance(_ metres: Double) -> String {
        let tenths = Int((max(0, metres) / 10).rounded())
        return "\(tenths / 100).\(pad(tenths % 100)) km"
    }

    /// Seconds per km as `5:30 /km`; `--:-- /km` when not known (0 or absent).
    public static func pace(_ secondsPerKm: Double?) -> String {
        guard let p = secondsPerKm, p > 0, p.isFinite, p < 6_000 else { return "--:-- /km" }
        let total = Int(p.rounded())
        return "\(total / 60):\(pad(total % 60)) /km"
    }

    /// A number without a needless fraction: `12`, `12.5`.
    public static func number(_ value: Double) -> String {
        if value.rounded() == value, abs(value) < 1e15 { return String(Int64(value)) }
        return String((value * 10).rounded() / 10)
    }

    private static func pad(_ value: some BinaryInteger) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }
}
