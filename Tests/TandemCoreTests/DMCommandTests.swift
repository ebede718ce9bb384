import Testing
@testable import TandemCore

@Suite struct DMCommandTests {
    private func decode(_ text: String) -> Result<DMCommand, DecodeFailure> {
        Result { () throws(DecodeFailure) in try DMCommand.decode(Array(text.utf8)) }
    }

    @Test func decodesAMessage() throws {
        let command = try decode(#"{"commandId":"c1","type":"message","peer":"bob","timestamp":1000,"text":"hi","extra":1}"#).get()
        #expect(command == DMCommand(commandId: "c1", type: .message, peer: "bob", timestamp: 1000, text: "hi"))
    }

    @Test func requestTextIsOptional() throws {
        let bare = try decode(#"{"commandId":"c1","type":"request","peer":"bob","timestamp":1}"#).get()
        #expect(bare.text == nil)
        let withText = try decode(#"{"commandId":"c1","type":"request","peer":"bob","timestamp":1,"text":"hello"}"#).get()
        #expect(withText.text == "hello")
    }

    @Test func textIsIgnoredOnOtherCommands() throws {
        let command = try decode(#"{"commandId":"c1","type":"accept","peer":"bob","timestamp":1,"text":"x"}"#).get()
        #expect(command.text == nil)
    }

    @Test func textIsLimitedTo4096Bytes() throws {
        let fits = String(repeating: "é", count: 2048)  // 4096 bytes
        #expect((try? decode(#"{"commandId":"c1","type":"message","peer":"bob","timestamp":1,"text":"\#(fits)"}"#).get()) != nil)
        let over = fits + "a"
        guard case .failure(let failure) = decode(#"{"commandId":"c1","type":"message","peer":"bob","timestamp":1,"text":"\#(over)"}"#) else {
            Issue.record("4097 bytes of text accepted")
            return
        }
        #expect(failure.id == "c1")
        #expect(failure.rejection.code == .invalidPayload)
    }

    @Test(arguments: [
        (#"{"commandId":"c1","type":"message","peer":"bob","timestamp":1}"#, "c1"),  // text missing
        (#"{"commandId":"c1","type":"wave","peer":"bob","timestamp":1}"#, "c1"),
        (#"{"commandId":"c1","type":"request","peer":"b b","timestamp":1}"#, "c1"),
        (#"{"commandId":"c1","type":"request","peer":"bob","timestamp":1.5}"#, "c1"),
        (#"{"commandId":"c1","type":"request","timestamp":1}"#, "c1"),
        (#"{"commandId":"c/1","type":"request","peer":"bob","timestamp":1}"#, ""),
        (#"{"type":"request","peer":"bob","timestamp":1}"#, ""),
        (#"{"commandId":"c1","type":"message","peer":"bob","timestamp":1,"text":5}"#, "c1"),
        (#"not json"#, ""),
    ])
    func rejectsInvalidPayloads(_ text: String, _ id: String) {
        guard case .failure(let failure) = decode(text) else {
            Issue.record("accepted \(text)")
            return
        }
        #expect(failure.id == id)
        #expect(failure.rejection.code == .invalidPayload)
    }

    @Test func roundTripsThroughItsWireForm() throws {
        let command = DMCommand(commandId: "c9", type: .request, peer: "carol", timestamp: 42, text: "yo \"there\"")
        #expect(try DMCommand.decode(command.json.serialized()) == command)
    }
}
