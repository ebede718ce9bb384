/// A token bucket: `ratePerSecond` tokens a second, at most `burst` saved up. One
/// event takes one token; none left means the event is refused (`rate_limited`).
public struct TokenBucket: Sendable, Equatable {
    public let ratePerSecond: Double
    public let burst: Double
    public private(set) var tokens: Double
    public private(set) var updatedAt: Millis

    public init(ratePerSecond: Double, burst: Double, now: Millis) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        self.tokens = burst
        self.updatedAt = now
    }

    /// Takes a token if there is one.
    public mutating func takeToken(now: Millis) -> Bool {
        refill(now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Whether the bucket is full again at `now` (an idle sender; safe to forget).
    public func isFull(now: Millis) -> Bool {
        tokens + Double(max(0, now - updatedAt)) * ratePerSecond / 1000 >= burst
    }

    /// Takes a token for one frame at `now` even when none is left, reserving ahead;
    /// returns how many milliseconds it waits before it is handled (0: at once). How
    /// tandem-web slows a session that sends too fast instead of dropping its frames.
    public mutating func reserve(now: Millis) -> Millis {
        refill(now: now)
        tokens -= 1
        guard tokens < 0, ratePerSecond > 0 else { return 0 }
        return Millis((-tokens * 1000 / ratePerSecond).rounded(.up))
    }

    mutating func refill(now: Millis) {
        guard now > updatedAt else { return }
        tokens = min(burst, tokens + Double(now - updatedAt) * ratePerSecond / 1000)
        updatedAt = now
    }
}
