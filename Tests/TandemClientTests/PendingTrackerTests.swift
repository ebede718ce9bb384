import Testing
import TandemClient
import TandemCore

@Suite struct PendingTrackerTests {
    func outgoing(_ id: String) -> Outgoing {
        Outgoing(id: id, topic: "t", payload: Array(id.utf8), label: "label \(id)")
    }

    func receipt(_ id: String, _ status: Receipt.Status) -> Receipt {
        Receipt(id: id, kind: .room, status: status, code: status == .rejected ? .ownedByOther : nil, message: "", version: 1)
    }

    @Test func acceptedAndDuplicateAcknowledgeRejectedCounts() {
        var t = PendingTracker()
        t.sent(outgoing("a"), at: 0)
        t.sent(outgoing("b"), at: 0)
        t.sent(outgoing("c"), at: 0)
        #expect(t.count == 3)
        #expect(t.receipt(receipt("a", .accepted)) == .acknowledged(outgoing("a")))
        #expect(t.receipt(receipt("b", .duplicate)) == .acknowledged(outgoing("b")))
        #expect(t.receipt(receipt("c", .rejected)) == .rejected(outgoing("c")))
        #expect(t.isEmpty)
        #expect(t.acknowledgedCount == 2)
        #expect(t.rejectedCount == 1)
    }

    @Test func unknownAndRepeatedReceiptsChangeNothing() {
        var t = PendingTracker()
        t.sent(outgoing("a"), at: 0)
        #expect(t.receipt(receipt("zz", .accepted)) == .unknown)
        #expect(t.receipt(receipt("a", .accepted)) == .acknowledged(outgoing("a")))
        #expect(t.receipt(receipt("a", .duplicate)) == .unknown)
        #expect(t.acknowledgedCount == 1)
    }

    @Test func resendsAfterTheIntervalWithTheSameIdAndPayload() {
        var t = PendingTracker(resendAfter: 5_000)
        t.sent(outgoing("a"), at: 1_000)
        t.sent(outgoing("b"), at: 3_000)
        #expect(t.dueForResend(at: 5_999).isEmpty)
        #expect(t.dueForResend(at: 6_000) == [outgoing("a")])
        #expect(t.dueForResend(at: 8_000) == [outgoing("b")])
        // a was resent at 6000: due again at 11000, not before.
        #expect(t.dueForResend(at: 10_999).isEmpty)
        #expect(t.dueForResend(at: 13_000) == [outgoing("a"), outgoing("b")])
        #expect(t.entry("a")?.attempts == 3)
        #expect(t.entry("a")?.firstSentAt == 1_000)
    }

    @Test func reconnectResendsEverythingInOrderAndRestartsTheTimer() {
        var t = PendingTracker(resendAfter: 5_000)
        for id in ["c", "a", "b"] { t.sent(outgoing(id), at: 0) }
        _ = t.receipt(receipt("a", .accepted))
        #expect(t.resendAll(at: 4_000) == [outgoing("c"), outgoing("b")])
        #expect(t.dueForResend(at: 8_999).isEmpty)
        #expect(t.dueForResend(at: 9_000).count == 2)
    }

    @Test func abandonGivesUpOnWhatIsLeft() {
        var t = PendingTracker()
        t.sent(outgoing("a"), at: 0)
        t.sent(outgoing("b"), at: 0)
        _ = t.receipt(receipt("b", .accepted))
        #expect(t.abandonAll() == [outgoing("a")])
        #expect(t.isEmpty)
    }

    @Test func generatedIdsAreValidAndDistinct() {
        var ids = IdentifierGenerator(user: String(repeating: "u", count: 64), random: .max)
        let first = ids.next(), second = ids.next()
        #expect(first != second)
        #expect(Identifier.isValid(first))
        #expect(first.hasSuffix("-1") && second.hasSuffix("-2"))
    }
}
