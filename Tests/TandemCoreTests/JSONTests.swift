import Testing
@testable import TandemCore

@Suite struct JSONTests {
    @Test func roundTripsAnObject() throws {
        let text = #"{"a":1,"b":[true,false,null],"c":"x\"y\\z\n","d":-1.5,"e":{"f":1e3}}"#
        let value = try JSON.parse(text)
        #expect(value["a"] == .int(1))
        #expect(value["c"]?.stringValue == "x\"y\\z\n")
        #expect(value["d"] == .double(-1.5))
        #expect(value["e"]?["f"] == .double(1000))
        // Integral doubles are written without a fraction, so compare the text.
        #expect(try JSON.parse(value.text).text == value.text)
    }

    @Test func keepsIntegersExact() throws {
        #expect(try JSON.parse("1763740000123") == .int(1_763_740_000_123))
        #expect(try JSON.parse("9223372036854775807") == .int(.max))
        // Too large for Int64: a double, still finite.
        #expect(try JSON.parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":}", "01", "1.", "-", "nul", "\"abc", "{\"a\" 1}", "[1] x",
        "1e999", "\"\\x\"", "\"\\ud800\"", "{\"a\":1,}",
    ])
    func refusesMalformedInput(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSON.parse(text) }
    }

    @Test func refusesDeepNesting() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSON.parse(deep) }
        let ok = String(repeating: "[", count: JSON.maxDepth) + String(repeating: "]", count: JSON.maxDepth)
        #expect((try? JSON.parse(ok)) != nil)
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSON.parse([0x22, 0xFF, 0x22]) }
    }

    @Test func decodesUnicodeEscapes() throws {
        #expect(try JSON.parse(#""\u00e9\ud83d\ude00""#) == .string("é😀"))
    }

    @Test func writesControlCharactersEscaped() {
        #expect(JSON.string("a\u{01}b").text == #""a\u0001b""#)
    }

    @Test func payloadReaderRecoversTheIdWhenAnotherFieldIsWrong() throws {
        let bytes = Array(#"{"eventId":"e1","timestamp":"soon"}"#.utf8)
        let reader = try PayloadReader.read(bytes, idSource: .field("eventId"))
        #expect(reader.id == "e1")
        #expect(throws: Rejection.invalid("timestamp must be an integer, not string")) { try reader.int64("timestamp") }
    }

    @Test func payloadReaderRejectsOversizedPayloads() {
        let big = Array(("{\"eventId\":\"e2\",\"x\":\"" + String(repeating: "a", count: 17_000) + "\"}").utf8)
        guard let failure = DecodeFailure.of({ try PayloadReader.read(big, idSource: .field("eventId")) }) else {
            Issue.record("oversized payload accepted")
            return
        }
        #expect(failure.id == "e2")
        #expect(failure.rejection.code == .payloadTooLarge)
    }

    @Test func payloadReaderRejectsNonObjects() {
        guard let failure = DecodeFailure.of({ try PayloadReader.read(Array("[1]".utf8), idSource: .field("eventId")) }) else {
            Issue.record("array accepted")
            return
        }
        #expect(failure == DecodeFailure(id: "", .invalid("payload must be a JSON object, not array")))
    }
}

@Suite struct TopicTests {
    let topics = Topics()

    @Test func parsesEveryInboundTopic() {
        #expect(topics.parseInbound("tandem/v1/rooms/r1/events/alice") == .roomEvent(room: "r1", user: "alice"))
        #expect(topics.parseInbound("tandem/v1/users/bob/dm/commands") == .dmCommand(user: "bob"))
        #expect(topics.parseInbound("tandem/v1/users/bob/workouts/w1/control/watch") == .workoutControl(user: "bob", workout: "w1", device: .watch))
        #expect(topics.parseInbound("tandem/v1/users/bob/workouts/w1/flight/phone") == .flight(user: "bob", workout: "w1", device: .phone))
        #expect(topics.parseInbound("tandem/v1/users/bob/workouts/w1/health/watch") == .health(user: "bob", workout: "w1", device: .watch))
        #expect(topics.parseInbound("tandem/v1/presence/carol/c-1") == .presence(user: "carol", clientId: "c-1"))
        #expect(topics.parseInbound("tandem/v1/users/carol/requests") == .request(user: "carol"))
    }

    @Test func invalidUserLevelIsDropped() {
        #expect(topics.parseInbound("tandem/v1/rooms/r1/events/al ice") == nil)
        #expect(topics.parseInbound("tandem/v1/users//dm/commands") == nil)
        #expect(topics.parseInbound("tandem/v1/rooms/r1/state") == nil)
        #expect(topics.parseInbound("other/v1/rooms/r1/events/alice") == nil)
    }

    /// Levels are split at every "/" byte, as the broker splits them: empty levels are
    /// levels, and a "/" followed by a combining mark (one `Character`) still ends one.
    @Test func levelsAreSplitAtEverySlashByte() {
        #expect(Topics.levels("a//b/".utf8[...]) == ["a", "", "b", ""])
        #expect(Topics.levels("".utf8[...]) == [""])
        #expect(Topics.levels("é/\u{301}x".utf8[...]) == ["é", "\u{301}x"])
        #expect(topics.parseInbound("tandem/v1/rooms/\u{301}r1/events/alice") == .invalid(user: "alice", kind: .room, reason: "invalid roomId in topic", idSource: .field("eventId")))
    }

    @Test func invalidOtherLevelIsAnsweredForTheSender() {
        #expect(topics.parseInbound("tandem/v1/rooms/r%1/events/alice") == .invalid(user: "alice", kind: .room, reason: "invalid roomId in topic", idSource: .field("eventId")))
        #expect(topics.parseInbound("tandem/v1/users/bob/workouts/w1/control/tablet") == .invalid(user: "bob", kind: .workout, reason: "device must be phone or watch", idSource: .field("commandId"), workout: "w1"))
    }

    @Test func identifierRules() {
        #expect(Identifier.isValid("a"))
        #expect(Identifier.isValid(String(repeating: "x", count: 64)))
        #expect(!Identifier.isValid(String(repeating: "x", count: 65)))
        #expect(!Identifier.isValid(""))
        for bad in ["a/b", "a+b", "a#b", "a b", "é"] { #expect(!Identifier.isValid(bad)) }
    }
}
