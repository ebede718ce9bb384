import Testing
@testable import TandemCore

@Suite struct EditEventDecodingTests {
    @Test func decodesACreate() throws {
        let text = #"{"eventId":"e1","type":"create","stickerId":"s1","timestamp":1763740000123,"image":"cat.png","frame":{"x":1.5,"y":-2,"width":10,"height":20},"extra":[1]}"#
        let event = try EditEvent.decode(Array(text.utf8))
        #expect(event == EditEvent(eventId: "e1", type: .create, stickerId: "s1", timestamp: 1_763_740_000_123, image: "cat.png", frame: Frame(x: 1.5, y: -2, width: 10, height: 20)))
    }

    @Test func decodesAReleaseWithoutImageOrFrame() throws {
        let event = try EditEvent.decode(Array(#"{"eventId":"e2","type":"release","stickerId":"s1","timestamp":5}"#.utf8))
        #expect(event.type == .release && event.image == nil && event.frame == nil)
    }

    @Test func encodesWhatItDecodes() throws {
        let event = Fixture.event(.create, "s9", id: "e9", at: 77)
        #expect(event.json().text == #"{"eventId":"e9","type":"create","stickerId":"s9","timestamp":77,"image":"star.png","frame":{"x":10,"y":20,"width":100,"height":50}}"#)
        #expect(try EditEvent.decode(event.json().serialized()) == event)
    }

    struct BadPayload: CustomTestStringConvertible, Sendable {
        var json: String
        var message: String
        var id: String
        var testDescription: String { message }
    }

    static let badPayloads: [BadPayload] = [
        .init(json: #"{"type":"create","stickerId":"s","timestamp":1}"#, message: "eventId is required", id: ""),
        .init(json: #"{"eventId":"bad id","type":"acquire","stickerId":"s","timestamp":1}"#, message: "eventId must be 1-64 characters of A-Z a-z 0-9 _ . -", id: ""),
        .init(json: #"{"eventId":7,"type":"acquire","stickerId":"s","timestamp":1}"#, message: "eventId must be a string, not number", id: ""),
        .init(json: #"{"eventId":"e","stickerId":"s","timestamp":1}"#, message: "type is required", id: "e"),
        .init(json: #"{"eventId":"e","type":"move","stickerId":"s","timestamp":1}"#, message: "type must be one of create, acquire, update, release, delete, invite, remove, role, leave, restore", id: "e"),
        .init(json: #"{"eventId":"e","type":"acquire","timestamp":1}"#, message: "stickerId is required", id: "e"),
        .init(json: #"{"eventId":"e","type":"acquire","stickerId":"s/1","timestamp":1}"#, message: "stickerId must be 1-64 characters of A-Z a-z 0-9 _ . -", id: "e"),
        .init(json: #"{"eventId":"e","type":"acquire","stickerId":"s"}"#, message: "timestamp is required", id: "e"),
        .init(json: #"{"eventId":"e","type":"acquire","stickerId":"s","timestamp":1.5}"#, message: "timestamp must be an integer, not a fraction", id: "e"),
        .init(json: #"{"eventId":"e","type":"acquire","stickerId":"s","timestamp":"1"}"#, message: "timestamp must be an integer, not string", id: "e"),
        .init(json: #"{"eventId":"e","type":"acquire","stickerId":"s","timestamp":-1}"#, message: "timestamp must not be negative", id: "e"),
        .init(json: #"{"eventId":"e","type":"create","stickerId":"s","timestamp":1,"frame":{"x":0,"y":0,"width":1,"height":1}}"#, message: "image is required for create", id: "e"),
        .init(json: #"{"eventId":"e","type":"create","stickerId":"s","timestamp":1,"image":"","frame":{"x":0,"y":0,"width":1,"height":1}}"#, message: "image must be 1-256 characters, not 0", id: "e"),
        .init(json: #"{"eventId":"e","type":"create","stickerId":"s","timestamp":1,"image":"\#(String(repeating: "a", count: 257))","frame":{"x":0,"y":0,"width":1,"height":1}}"#, message: "image must be 1-256 characters, not 257", id: "e"),
        .init(json: #"{"eventId":"e","type":"create","stickerId":"s","timestamp":1,"image":5,"frame":{"x":0,"y":0,"width":1,"height":1}}"#, message: "image must be a string, not number", id: "e"),
        .init(json: #"{"eventId":"e","type":"create","stickerId":"s","timestamp":1,"image":"a"}"#, message: "frame is required for create", id: "e"),
        .init(json: #"{"eventId":"e","type":"update","stickerId":"s","timestamp":1}"#, message: "frame is required for update", id: "e"),
        .init(json: #"{"eventId":"e","type":"update","stickerId":"s","timestamp":1,"frame":[1,2]}"#, message: "frame must be an object, not array", id: "e"),
        .init(json: #"{"eventId":"e","type":"update","stickerId":"s","timestamp":1,"frame":{"y":0,"width":1,"height":1}}"#, message: "frame.x is required", id: "e"),
        .init(json: #"{"eventId":"e","type":"update","stickerId":"s","timestamp":1,"frame":{"x":"0","y":0,"width":1,"height":1}}"#, message: "frame.x must be a finite number, not string", id: "e"),
        .init(json: #"{"eventId":"e","type":"update","stickerId":"s","timestamp":1,"frame":{"x":0,"y":0,"width":0,"height":1}}"#, message: "frame.width must be greater than 0", id: "e"),
        .init(json: #"{"eventId":"e","type":"update","stickerId":"s","timestamp":1,"frame":{"x":0,"y":0,"width":1,"height":-3}}"#, message: "frame.height must be greater than 0", id: "e"),
        .init(json: #"{"eventId":"e","type":"acquire","stickerId":"s","timestamp":1,"frame":{"x":0,"y":0,"width":1}}"#, message: "frame.height is required", id: "e"),
        .init(json: #"["eventId"]"#, message: "payload must be a JSON object, not array", id: ""),
    ]

    @Test(arguments: badPayloads)
    func rejectsBadPayloadsNamingTheField(_ bad: BadPayload) {
        guard let failure = DecodeFailure.of({ try EditEvent.decode(Array(bad.json.utf8)) }) else {
            Issue.record("accepted \(bad.json)")
            return
        }
        #expect(failure.rejection == .invalid(bad.message))
        #expect(failure.id == bad.id)
    }

    /// Broken JSON is answered under its id whenever the id itself can be read (the
    /// contract's Changes of 2026-11-22), and under "" when it cannot.
    @Test func rejectsBrokenJSONWithItsIdWhenReadable() {
        guard let failure = DecodeFailure.of({ try EditEvent.decode(Array(#"{"eventId":"e","type":"#.utf8)) }) else {
            Issue.record("accepted broken JSON")
            return
        }
        #expect(failure.id == "e")
        #expect(failure.rejection.code == .invalidPayload)
        guard let cut = DecodeFailure.of({ try EditEvent.decode(Array(#"{"eventId":"e"#.utf8)) }) else {
            Issue.record("accepted broken JSON")
            return
        }
        #expect(cut.id == "")
    }

    @Test func countsImageLengthInCharactersNotBytes() throws {
        let image = String(repeating: "é", count: 256)  // 512 bytes of UTF-8
        let event = Fixture.event(.create, "s", id: "e", image: image)
        #expect(try EditEvent.decode(event.json().serialized()).image == image)
    }

    @Test func refusesOversizedPayloadsWithTheirId() {
        let text = #"{"eventId":"big","type":"release","stickerId":"s","timestamp":1,"pad":""# + String(repeating: "x", count: 17_000) + "\"}"
        guard let failure = DecodeFailure.of({ try EditEvent.decode(Array(text.utf8)) }) else {
            Issue.record("accepted an oversized payload")
            return
        }
        #expect(failure.rejection.code == .payloadTooLarge)
        #expect(failure.id == "big")
    }
}
