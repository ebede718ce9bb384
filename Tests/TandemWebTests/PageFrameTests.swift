import Testing
import TandemCore
@testable import TandemWeb

/// The page's frames are read like MQTT payloads: anything malformed is a Problem with a
/// code and a message naming what is wrong, never a crash.
@Suite struct PageFrameTests {
    private func refusal(_ text: String) -> PageFrame.Problem? {
        if case .failure(let problem) = PageFrame.decode(Array(text.utf8)) { return problem }
        return nil
    }

    @Test func readsEachType() throws {
        #expect(try PageFrame.decode(Array(#"{"type":"ping"}"#.utf8)).get() == .ping)
        #expect(try PageFrame.decode(Array(#"{"type":"watch","room":"r1"}"#.utf8)).get() == .watch(room: "r1"))
        let create = #"{"type":"edit","ref":"r7","room":"q","op":"create","sticker":"s1","image":"star","frame":{"x":1,"y":2,"width":3,"height":4}}"#
        #expect(try PageFrame.decode(Array(create.utf8)).get()
            == .edit(ref: "r7", room: "q", type: .create, sticker: "s1", image: "star", frame: Frame(x: 1, y: 2, width: 3, height: 4)))
        #expect(try PageFrame.decode(Array(#"{"type":"dm","ref":"a","op":"message","peer":"bob","text":"hi"}"#.utf8)).get()
            == .dm(ref: "a", type: .message, peer: "bob", text: "hi"))
        #expect(try PageFrame.decode(Array(#"{"type":"history","peer":"bob","before":1700000000000}"#.utf8)).get()
            == .history(peer: "bob", before: 1_700_000_000_000))
        #expect(try PageFrame.decode(Array(#"{"type":"history","peer":"bob"}"#.utf8)).get() == .history(peer: "bob", before: nil))
        #expect(try PageFrame.decode(Array(#"{"type":"member","ref":"m","room":"q","op":"role","member":"bob","role":"viewer"}"#.utf8)).get()
            == .member(ref: "m", room: "q", type: .role, member: "bob", role: .viewer))
    }

    @Test(arguments: [
        ("not json", "invalid JSON"),
        ("[1,2]", "must be a JSON object"),
        (#"{"room":"r1"}"#, "type"),
        (#"{"type":"watch","room":"no spaces"}"#, "room"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"create","sticker":"s1","frame":{"x":0,"y":0,"width":1,"height":1}}"#, "image is required"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"update","sticker":"s1"}"#, "frame is required"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"update","sticker":"s1","frame":{"x":0,"y":0,"width":0,"height":1}}"#, "width"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"invite","sticker":"s1"}"#, "op must be"),
        (#"{"type":"edit","ref":"r1","room":"q","op":"explode","sticker":"s1"}"#, "op"),
        (#"{"type":"dm","ref":"r1","op":"message","peer":"bob"}"#, "text is required"),
        (#"{"type":"history","peer":"bob","before":-5}"#, "before must be"),
        (#"{"type":"history","peer":"bob","before":1.5}"#, "before must be an integer"),
        (#"{"type":"history"}"#, "peer"),
        (#"{"type":"member","ref":"m","room":"q","op":"role","member":"bob","role":"owner"}"#, "role must be"),
    ])
    func refusesMalformed(_ text: String, _ says: String) throws {
        let problem = try #require(refusal(text))
        #expect(problem.code == .invalidFrame)
        #expect(problem.message.contains(says), "\(problem.message)")
    }

    @Test func namesTheRefOfABadFrame() throws {
        let problem = try #require(refusal(#"{"type":"edit","ref":"r9","room":"q","op":"update","sticker":"s1"}"#))
        #expect(problem.ref == "r9")
    }

    @Test func unknownType() throws {
        let problem = try #require(refusal(#"{"type":"launch"}"#))
        #expect(problem.code == .unknownType)
        #expect(problem.message.contains("launch"))
    }

    @Test func oversized() throws {
        let text = #"{"type":"dm","ref":"r1","op":"message","peer":"bob","text":""# + String(repeating: "x", count: PageFrame.maxBytes) + #""}"#
        let problem = try #require(refusal(text))
        #expect(problem.code == .frameTooLarge)
    }

    @Test func dmTextOverItsLimit() throws {
        let text = #"{"type":"dm","ref":"r1","op":"message","peer":"bob","text":""# + String(repeating: "x", count: 4097) + #""}"#
        let problem = try #require(refusal(text))
        #expect(problem.code == .invalidFrame)
        #expect(problem.message.contains("4096"))
    }
}

/// Only this server's pages (and clients that are no browser) may open a WebSocket on
/// the cookie.
@Suite struct OriginTests {
    @Test(arguments: [
        (nil, "127.0.0.1:8080", true),
        ("http://127.0.0.1:8080", "127.0.0.1:8080", true),
        ("https://tandem.example", "tandem.example", true),
        ("ws://127.0.0.1", "127.0.0.1:8080", true),
        ("http://evil.example", "127.0.0.1:8080", false),
        ("http://127.0.0.1:9999", "127.0.0.1:8080", false),
        ("null", "127.0.0.1:8080", false),
        ("http://127.0.0.1:8080", nil, false),
    ] as [(String?, String?, Bool)])
    func sameOrigin(_ origin: String?, _ authority: String?, _ allowed: Bool) {
        #expect(WebServer.sameOrigin(origin: origin, authority: authority) == allowed)
    }
}

/// "Wrong username or password" only when the broker turned the account away.
@Suite struct SignInFailureTests {
    @Test(arguments: [
        ("the broker at 127.0.0.1:1883 refused the credentials of user 'alice' (Bad user name or password): check the username and password", true),
        ("the broker at 127.0.0.1:1883 refused a connection without credentials (Not authorized): give a username and a password", true),
        ("127.0.0.1:1883 took the connection and closed it without an MQTT answer (is that port an MQTT broker? a TLS listener needs --tls-ca-file)", false),
        ("the broker at 127.0.0.1:1883 refused the connection: Server unavailable", false),
    ])
    func refusedCredentials(_ reason: String, _ refused: Bool) {
        #expect(SessionStore.refusedCredentials(reason) == refused)
    }
}

/// A session that sends too fast waits; nothing is dropped.
@Suite struct PacerTests {
    @Test func burstGoesAtOnceThenFramesWait() {
        var pacer = TokenBucket(ratePerSecond: 10, burst: 3, now: 0)
        #expect((0..<3).map { _ in pacer.reserve(now: 0) } == [0, 0, 0])
        // The next ones are reserved ahead, 100 ms apart.
        #expect(pacer.reserve(now: 0) == 100)
        #expect(pacer.reserve(now: 0) == 200)
    }

    @Test func refillsWithTime() {
        var pacer = TokenBucket(ratePerSecond: 10, burst: 2, now: 0)
        _ = pacer.reserve(now: 0)
        _ = pacer.reserve(now: 0)
        #expect(pacer.reserve(now: 100) == 0)
        #expect(pacer.reserve(now: 100) == 100)
        // Idle time refills up to the burst, no further.
        #expect(pacer.reserve(now: 10_000) == 0)
        #expect(pacer.reserve(now: 10_000) == 0)
        #expect(pacer.reserve(now: 10_000) == 100)
    }
}
