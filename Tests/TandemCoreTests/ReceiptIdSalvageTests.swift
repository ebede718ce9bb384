import Testing
import TandemCore

/// A rejection carries the id its sender can match whenever the id field itself can be
/// read, however the rest of the payload is broken (CONTRACT "Receipts", Changes of
/// 2026-11-22; issue 12).
@Suite struct ReceiptIdSalvageTests {
    static let brokenEdits: [(String, [UInt8])] = [
        ("lone surrogate in image", Array(#"{"eventId":"e1","type":"create","stickerId":"s1","timestamp":1,"image":"\ud800","frame":{"x":1,"y":1,"width":1,"height":1}}"#.utf8)),
        ("number too large for a double", Array(#"{"eventId":"e1","type":"update","stickerId":"s1","timestamp":1,"frame":{"x":1e999,"y":1,"width":1,"height":1}}"#.utf8)),
        ("truncated tail", Array(#"{"eventId":"e1","type":"update","stickerId":"s1","timestamp":1,"frame":{"x":1,"#.utf8)),
        ("byte-order mark", [0xEF, 0xBB, 0xBF] + Array(#"{"eventId":"e1","type":"delete","stickerId":"s1","timestamp":1}"#.utf8)),
        ("NUL byte in a string", Array(#"{"eventId":"e1","type":"delete","stickerId":"s"#.utf8) + [0] + Array(#"1","timestamp":1}"#.utf8)),
        ("overlong UTF-8", Array(#"{"eventId":"e1","type":"create","stickerId":"s1","timestamp":1,"image":""#.utf8) + [0xC0, 0xAF] + Array(#"","frame":{"x":1,"y":1,"width":1,"height":1}}"#.utf8)),
        ("deep nesting", Array(#"{"eventId":"e1","x":"#.utf8) + Array(repeating: UInt8(ascii: "["), count: 100) + Array(repeating: UInt8(ascii: "]"), count: 100) + Array(#","type":"delete","stickerId":"s1","timestamp":1}"#.utf8)),
        ("trailing garbage", Array(#"{"eventId":"e1","type":"delete","stickerId":"s1","timestamp":1}}"#.utf8)),
        ("duplicate keys, last one valid", Array(#"{"eventId":"bad id","eventId":"e1","type":"nope","stickerId":"s1","timestamp":1}"#.utf8)),
    ]

    @Test(arguments: brokenEdits.map(\.0))
    func anEditEventsIdSurvivesABrokenPayload(_ name: String) throws {
        let bytes = try #require(Self.brokenEdits.first { $0.0 == name }?.1)
        guard let failure = DecodeFailure.of({ try EditEvent.decode(bytes) }) else {
            Issue.record("\(name) was accepted")
            return
        }
        #expect(failure.id == "e1", "\(name): \(failure.rejection.message)")
        #expect(failure.rejection.code == .invalidPayload)
    }

    @Test func aDMCommandsIdSurvivesALoneSurrogateInItsText() {
        let bytes = Array(#"{"commandId":"c9","type":"message","peer":"bob","timestamp":1,"text":"hi \udc00"}"#.utf8)
        guard let failure = DecodeFailure.of({ try DMCommand.decode(bytes) }) else {
            Issue.record("accepted")
            return
        }
        #expect(failure.id == "c9")
    }

    @Test func telemetryIsAnsweredUnderItsTimestampWhateverElseIsWrong() {
        let flight = Array(#"{"timestamp":1763740000123,"elapsedTime":1e999,"distance":"#.utf8)
        guard let f = DecodeFailure.of({ try FlightData.decode(flight) }) else { Issue.record("accepted"); return }
        #expect(f.id == "flight:1763740000123")
        let health = Array(#"{"heartRate":"\ud800","timestamp":42 ,"cadence":1}"#.utf8)
        guard let h = DecodeFailure.of({ try HealthData.decode(health) }) else { Issue.record("accepted"); return }
        #expect(h.id == "health:42")
    }

    @Test func aValueCutOffOrEscapedIsNeverGuessed() {
        // The number may have been cut: no id rather than a wrong one.
        #expect(FieldSalvage.int64(Array(#"{"timestamp":17637"#.utf8), key: "timestamp") == nil)
        #expect(FieldSalvage.string(Array(#"{"eventId":"e1"#.utf8), key: "eventId") == nil)
        #expect(FieldSalvage.string(Array(#"{"eventId":"e\u0031","x":"#.utf8), key: "eventId") == nil)
        // Only members of the outermost object count.
        #expect(FieldSalvage.string(Array(#"{"frame":{"eventId":"inner"},"eventId":"outer","#.utf8), key: "eventId") == "outer")
        #expect(FieldSalvage.string(Array(#"{"text":"\"eventId\":\"fake\"","x":"#.utf8), key: "eventId") == nil)
        #expect(FieldSalvage.string(Array(#"["eventId","e1"]"#.utf8), key: "eventId") == nil)
        // The last member of a name decides, as in a parse (found by the fuzzer).
        #expect(FieldSalvage.int64(Array(#"{"timestamp":1763740000000,"timestamp":17637459.9,"x":1}"#.utf8), key: "timestamp") == nil)
        #expect(FieldSalvage.string(Array(#"{"eventId":"e1","eventId":"e\u0032","x":"#.utf8), key: "eventId") == nil)
    }

    @Test func anInvalidIdIsNotSalvaged() {
        let bytes = Array(#"{"eventId":"a/b","type":"create","image":"\ud800"}"#.utf8)
        guard let failure = DecodeFailure.of({ try EditEvent.decode(bytes) }) else { Issue.record("accepted"); return }
        #expect(failure.id == "")
    }

    @Test func anInvalidDeviceKeepsTheTelemetryIdAndNamesTheWorkout() {
        let topics = Topics(root: "tandem/v1")
        let route = topics.parseInbound("tandem/v1/users/bob/workouts/w1/flight/tablet")
        #expect(route == .invalid(user: "bob", kind: .workout, reason: "device must be phone or watch", idSource: .timestamp(prefix: "flight"), workout: "w1"))
        #expect(ReceiptIdSource.timestamp(prefix: "flight").id(of: Array(#"{"timestamp":7,"x":"#.utf8)) == "flight:7")
    }
}
