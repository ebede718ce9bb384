import Testing
@testable import TandemCore

@Suite struct TokenBucketTests {
    /// Takes a token at each time and says which were granted.
    func grants(_ bucket: inout TokenBucket, at times: [Millis]) -> [Bool] {
        times.map { bucket.takeToken(now: $0) }
    }

    @Test func allowsABurstThenTheRate() {
        var bucket = TokenBucket(ratePerSecond: 10, burst: 3, now: 0)
        // 10/s: one token every 100 ms once the burst of 3 is spent.
        #expect(grants(&bucket, at: [0, 0, 0, 0, 99, 100, 150]) == [true, true, true, false, false, true, false])
    }

    @Test func savesNoMoreThanTheBurst() {
        var bucket = TokenBucket(ratePerSecond: 1000, burst: 2, now: 0)
        #expect(grants(&bucket, at: [10_000, 10_000, 10_000]) == [true, true, false])
        #expect(bucket.isFull(now: 20_000))
    }

    @Test func aClockGoingBackwardsGrantsNothing() {
        var bucket = TokenBucket(ratePerSecond: 10, burst: 1, now: 1000)
        #expect(grants(&bucket, at: [1000, 0]) == [true, false])
    }
}
