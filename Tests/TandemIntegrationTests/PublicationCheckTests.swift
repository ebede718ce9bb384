import Testing
import TestSupport

/// The checker of NetworkFaultTests, on sequences a correct leader and a broken one
/// publish: it must pass the first and fail each kind of the second.
@Suite struct PublicationCheckTests {
    @Test func aTakeoverThatPublishesTheStateWholeIsNoGap() {
        var check = PublicationCheck()
        check.snapshot(version: 10)
        check.change(from: 11, to: 12, versions: [11, 12], eventIds: ["a", "b"])
        // The old leader committed 13-15 and was cut before publishing; the new one
        // publishes the state whole, then goes on.
        check.snapshot(version: 15)
        check.change(from: 16, to: 16, versions: [16], eventIds: ["c"])
        // One version committed, its change lost with the leader: the next one's snapshot
        // is at exactly that version (seen in a run: P = 4, a host cut).
        check.snapshot(version: 17)
        check.change(from: 18, to: 18, versions: [18], eventIds: ["c2"])
        // State before the changes of the same batch.
        check.snapshot(version: 20)
        check.change(from: 19, to: 20, versions: [19, 20], eventIds: ["d", "e"])
        #expect(check.allProblems.isEmpty, "\(check.allProblems)")
    }

    @Test func anOldLeaderPublishingAfterTheNewOneIsCaught() {
        var check = PublicationCheck()
        check.snapshot(version: 20)
        check.change(from: 21, to: 21, versions: [21], eventIds: ["x"])
        // The cut leader's queued publications arrive after the heal.
        check.snapshot(version: 19)
        check.change(from: 21, to: 21, versions: [21], eventIds: ["x"])
        #expect(check.allProblems.contains { $0.contains("older state") })
        #expect(check.allProblems.contains { $0.contains("version 21 in two") })
        #expect(check.allProblems.contains { $0.contains("event x in two") })
    }

    @Test func changesThatSkipVersionsAreCaught() {
        var check = PublicationCheck()
        check.snapshot(version: 5)
        check.change(from: 6, to: 6, versions: [6], eventIds: ["a"])
        check.change(from: 9, to: 9, versions: [9], eventIds: ["b"])
        #expect(check.uncovered == [7, 8])
        #expect(check.allProblems.count == 1)
    }
}
