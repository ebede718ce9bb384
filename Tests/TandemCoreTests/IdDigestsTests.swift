import Testing
@testable import TandemCore

@Suite struct IdDigestsTests {
    static let slot = IdDigests.slotMs
    static let t0: Millis = 1_800_000_000_000

    func digests(_ ids: [(String, String, Millis)], since: Millis = t0) -> IdDigests {
        var d = IdDigests(since: since)
        for (user, id, at) in ids { d.insert(digest: IdDigests.digest(user: user, id: id), seenAt: at) }
        d.seal()
        return d
    }

    @Test(arguments: [0, 1, 15, 16, 17, 1_000, 40_000])
    func findsWhatWasInsertedAndNothingElse(count: Int) {
        let d = digests((0..<count).map { ("u\($0 % 7)", "e\($0)", Self.t0 + Millis($0)) })
        #expect(d.count == count)
        for i in 0..<count { #expect(d.contains(user: "u\(i % 7)", id: "e\(i)")) }
        // Another user's id, and ids never inserted: (with 48 bits, no collision here).
        for i in 0..<min(count, 500) { #expect(!d.contains(user: "u\((i + 1) % 7)", id: "e\(i)")) }
        for i in count..<(count + 500) { #expect(!d.contains(user: "u\(i % 7)", id: "e\(i)")) }
    }

    @Test func theSeparatorKeepsUserAndIdApart() {
        #expect(IdDigests.digest(user: "ab", id: "c") != IdDigests.digest(user: "a", id: "bc"))
        #expect(IdDigests.digest(user: "alice", id: "e1") == IdDigests.digest(user: "alice", id: "e1"))
        #expect(IdDigests.digest(user: "alice", id: "e1") < 1 << 48)
    }

    @Test func mergesKeepEverythingFindable() {
        var d = digests((0..<3_000).map { ("alice", "old\($0)", Self.t0) })
        d.merge((0..<500).map { (IdDigests.digest(user: "bob", id: "new\($0)"), Self.t0 + 5 * Self.slot) })
        #expect(d.count == 3_500)
        for i in 0..<3_000 { #expect(d.contains(user: "alice", id: "old\(i)")) }
        for i in 0..<500 { #expect(d.contains(user: "bob", id: "new\(i)")) }
        #expect(!d.contains(user: "bob", id: "old1"))
    }

    /// Forgetting goes by whole minutes: an id
    /// is kept until the minute it was first seen in has ended before the cutoff, never
    /// forgotten early.
    @Test func forgetsWholeSlotsBeforeTheCutoff() {
        let start = Self.t0 - Self.t0 % Self.slot
        var d = digests([
            ("a", "h0", start), ("a", "h0-late", start + Self.slot - 1),
            ("a", "h1", start + Self.slot), ("a", "h3", start + 3 * Self.slot + 5),
        ], since: start)
        d.forget(before: start + Self.slot - 1)     // minute 0 has not ended yet
        #expect(d.count == 4)
        d.forget(before: start + Self.slot + 30)    // minute 0 has ended
        #expect(d.count == 2)
        #expect(!d.contains(user: "a", id: "h0") && !d.contains(user: "a", id: "h0-late"))
        #expect(d.contains(user: "a", id: "h1") && d.contains(user: "a", id: "h3"))
        // Counted from the new base on: what is added later is forgotten on time too.
        d.merge([(IdDigests.digest(user: "a", id: "h5"), start + 5 * Self.slot)])
        d.forget(before: start + 4 * Self.slot)
        #expect(d.count == 1 && d.contains(user: "a", id: "h5"))
        d.forget(before: start + 6 * Self.slot)
        #expect(d.isEmpty)
    }

    @Test func idsSeenBeforeTheBaseCountAsSeenInItsSlot() {
        let start = Self.t0 - Self.t0 % Self.slot
        var d = digests([("a", "early", start - 10 * Self.slot)], since: start)
        #expect(d.contains(user: "a", id: "early"))
        d.forget(before: start + Self.slot)
        #expect(d.isEmpty)
    }
}
