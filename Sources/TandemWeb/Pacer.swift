import TandemCore

/// How a session that sends too fast is slowed, not dropped: a token bucket whose
/// tokens may be reserved ahead. Each frame takes one token; when none is left the frame
/// still goes, after the wait this returns (the tab stops reading meanwhile, so TCP
/// slows the page down). Pure: the caller passes the clock and sleeps.
public struct Pacer: Sendable, Equatable {
    public let ratePerSecond: Double
    public let burst: Double
    /// Tokens left; negative: reserved ahead by frames that wait.
    public private(set) var tokens: Double
    public private(set) var updatedAt: Millis

    public init(ratePerSecond: Double, burst: Double, now: Millis) {
        precondition(ratePerSecond > 0 && burst >= 1, "a pacer needs a positive rate and a burst of at least 1")
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        tokens = burst
        updatedAt = now
    }

    /// Takes a token for one frame at `now`; returns how many milliseconds the frame
    /// waits before it is handled (0: at once).
    public mutating func reserve(now: Millis) -> Millis {
        if now > updatedAt {
            tokens = min(burst, tokens + Double(now - updatedAt) * ratePerSecond / 1000)
            updatedAt = now
        }
        tokens -= 1
        guard tokens < 0 else { return 0 }
        return Millis((-tokens * 1000 / ratePerSecond).rounded(.up))
    }
}
