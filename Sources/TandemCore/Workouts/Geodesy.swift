#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Great-circle arithmetic on a spherical Earth.
public enum Geodesy {
    /// The mean Earth radius, metres.
    public static let earthRadius = 6_371_000.0

    /// The great-circle distance in metres between two positions (haversine formula).
    public static func distance(fromLatitude lat1: Double, longitude lon1: Double, toLatitude lat2: Double, longitude lon2: Double) -> Double {
        let φ1 = radians(lat1), φ2 = radians(lat2)
        let Δφ = radians(lat2 - lat1), Δλ = radians(lon2 - lon1)
        let a = sin(Δφ / 2) * sin(Δφ / 2) + cos(φ1) * cos(φ2) * sin(Δλ / 2) * sin(Δλ / 2)
        return 2 * earthRadius * asin(min(1, a.squareRoot()))
    }

    /// The initial bearing from the first position towards the second, degrees clockwise
    /// from north in [0, 360).
    public static func bearing(fromLatitude lat1: Double, longitude lon1: Double, toLatitude lat2: Double, longitude lon2: Double) -> Double {
        let φ1 = radians(lat1), φ2 = radians(lat2)
        let Δλ = radians(lon2 - lon1)
        let y = sin(Δλ) * cos(φ2)
        let x = cos(φ1) * sin(φ2) - sin(φ1) * cos(φ2) * cos(Δλ)
        let degrees = atan2(y, x) * 180 / .pi
        let normalized = degrees < 0 ? degrees + 360 : degrees
        return normalized >= 360 ? 0 : normalized
    }

    public static func distance(from a: GPSFix, to b: GPSFix) -> Double {
        distance(fromLatitude: a.latitude, longitude: a.longitude, toLatitude: b.latitude, longitude: b.longitude)
    }

    public static func bearing(from a: GPSFix, to b: GPSFix) -> Double {
        bearing(fromLatitude: a.latitude, longitude: a.longitude, toLatitude: b.latitude, longitude: b.longitude)
    }

    /// The position `metres` away from a point along `bearing` degrees.
    public static func destination(fromLatitude lat: Double, longitude lon: Double, bearing: Double, metres: Double) -> (latitude: Double, longitude: Double) {
        let δ = metres / earthRadius, θ = radians(bearing)
        let φ1 = radians(lat), λ1 = radians(lon)
        let φ2 = asin(sin(φ1) * cos(δ) + cos(φ1) * sin(δ) * cos(θ))
        let λ2 = λ1 + atan2(sin(θ) * sin(δ) * cos(φ1), cos(δ) - sin(φ1) * sin(φ2))
        var longitude = λ2 * 180 / .pi
        if longitude > 180 { longitude -= 360 } else if longitude < -180 { longitude += 360 }
        return (φ2 * 180 / .pi, longitude)
    }

    static func radians(_ degrees: Double) -> Double { degrees * .pi / 180 }
}
