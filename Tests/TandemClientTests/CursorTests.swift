import Testing
import TandemClient
import TandemCore

/// The cursor's payloads and its pace (``CursorThrottle``), on a clock the test moves.
@Suite struct CursorTests {
    static func ms(_ n: Int) -> Duration { .milliseconds(n) }

    @Test(arguments: [
        (#"{"x":1,"y":2.5}"#, CursorPosition?.some(CursorPosition(x: 1, y: 2.5))),
        (#"{"y":-3,"x":0,"color":"red"}"#, CursorPosition(x: 0, y: -3)),
        ("{}", nil),
        (#"{"seen":true}"#, nil),
    ])
    func readsPositionsAndTheLeavingPointer(payload: String, expected: CursorPosition?) throws {
        let read = try #require(CursorPosition.decode(Array(payload.utf8)))
        #expect(read == expected)
    }

    @Test(arguments: [
        #"{"x":1}"#, #"{"y":1}"#, #"{"x":"1","y":2}"#, #"{"x":null,"y":2}"#, #"{"x":1e999,"y":0}"#,
        "[1,2]", "12", "", "not json", #"{"x":1,"y":2"#,
    ])
    func ignoresMalformedPayloads(payload: String) {
        #expect(CursorPosition.decode(Array(payload.utf8)) == nil)
    }

    @Test func writesTheContractsPayloads() throws {
        let json = try JSON.parse(CursorPosition.payload(CursorPosition(x: 12.5, y: 3)))
        #expect(json["x"]?.doubleValue == 12.5 && json["y"]?.doubleValue == 3)
        #expect(CursorPosition.payload(nil) == Array("{}".utf8))
    }

    @Test func aBurstSendsTheFirstAtOnceAndTheLastAfterTheInterval() {
        var throttle = CursorThrottle()
        #expect(throttle.offer(CursorPosition(x: 1, y: 1), at: Self.ms(1_000)) == .send(CursorPosition(x: 1, y: 1)))
        #expect(throttle.offer(CursorPosition(x: 2, y: 2), at: Self.ms(1_010)) == .wait(until: Self.ms(1_050)))
        #expect(throttle.offer(CursorPosition(x: 3, y: 3), at: Self.ms(1_020)) == .held)
        #expect(throttle.flush(at: Self.ms(1_049)) == nil, "early: nothing yet")
        #expect(throttle.flush(at: Self.ms(1_051)) == .some(CursorPosition(x: 3, y: 3)), "the last one wins")
        #expect(throttle.flush(at: Self.ms(1_200)) == nil, "nothing waits")
        // After a quiet spell the next goes at once.
        #expect(throttle.offer(CursorPosition(x: 4, y: 4), at: Self.ms(1_200)) == .send(CursorPosition(x: 4, y: 4)))
        #expect(throttle.shown)
    }

    @Test func leavingRightAfterAMoveIsNotLost() {
        var throttle = CursorThrottle()
        _ = throttle.offer(CursorPosition(x: 1, y: 1), at: Self.ms(0))
        #expect(throttle.offer(nil, at: Self.ms(5)) == .wait(until: Self.ms(50)))
        #expect(throttle.flush(at: Self.ms(50)) == .some(nil))
        #expect(!throttle.shown)
    }

    /// Random pointer traffic, with the flushes run when asked: never two messages closer
    /// than the interval (so at most 20 in any second), and once the traffic stops, what
    /// was sent last is what was offered last.
    @Test(arguments: 1...50)
    func neverFasterThanTheIntervalAndTheLastPositionAlwaysGoesOut(seed: Int) throws {
        var rng = UndoPropertyTests.Random(seed: UInt64(seed))
        var throttle = CursorThrottle()
        var now = Duration.zero
        var flushAt: Duration?
        var sent: [(at: Duration, position: CursorPosition?)] = []
        var lastOffered: CursorPosition??
        for n in 0..<400 {
            now += .milliseconds(Int.random(in: 0...40, using: &rng))
            if let due = flushAt, due <= now {
                flushAt = nil
                if let position = throttle.flush(at: due) { sent.append((due, position)) }
            }
            let position: CursorPosition? = Int.random(in: 0..<10, using: &rng) == 0 ? nil : CursorPosition(x: Double(n), y: 1)
            lastOffered = .some(position)
            switch throttle.offer(position, at: now) {
            case .send(let value): sent.append((now, value))
            case .wait(let until): flushAt = until
            case .held: #expect(flushAt != nil)
            }
        }
        if let due = flushAt, let position = throttle.flush(at: due) { sent.append((due, position)) }
        for (a, b) in zip(sent, sent.dropFirst()) { #expect(b.at - a.at >= .milliseconds(50)) }
        let last = try #require(sent.last)
        #expect(.some(last.position) == lastOffered)
        #expect(throttle.flushDue == nil && throttle.waiting == nil)
    }
}
