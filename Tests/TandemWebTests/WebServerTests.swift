import Foundation
import Hummingbird
import HummingbirdTesting
import HummingbirdWSTesting
import Logging
import NIOCore
import TandemClient
import TandemMQTT
import Testing
import TestSupport
@testable import TandemWeb

/// tandem-web in front of a real mosquitto (the shipped configuration: the demo users and
/// their ACL) and a real coordinator, driven over HTTP and WebSockets as a browser does.
@Suite(.serialized) struct WebServerTests {
    static let logger = Logger(label: "tandem.web.test")

    /// The app on a free port over `broker` (no broker: one nobody listens on).
    static func app(
        broker: MosquittoBroker?, tabGrace: Duration = .seconds(5), framesPerSecond: Double = 50, frameBurst: Double = 100,
        maxSessions: Int = .max
    ) throws -> (some ApplicationProtocol, SessionStore) {
        let settings = WebSettings(
            brokerHost: "127.0.0.1", brokerPort: broker?.port ?? 1, tabGrace: tabGrace, framesPerSecond: framesPerSecond,
            frameBurst: frameBurst, connectTimeout: .seconds(3), maxSessions: maxSessions)
        let store = try SessionStore(settings: settings, logger: logger)
        return (WebServer.application(store: store, host: "127.0.0.1", port: 0, logger: logger), store)
    }

    /// A coordinator and the app over a shipped broker, alice and bob signed in: `body`
    /// gets the test client and their two session cookies.
    static func withAliceAndBob(
        coordinatorArguments: [String] = [], framesPerSecond: Double = 50, frameBurst: Double = 100,
        _ body: @escaping @Sendable (any TestClientProtocol, String, String) async throws -> Void
    ) async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: coordinatorArguments)
            defer { Task { await coordinator.kill() } }
            let (app, _) = try Self.app(broker: broker, framesPerSecond: framesPerSecond, frameBurst: frameBurst)
            try await app.test(.live) { client in
                try await body(client, try await Self.signIn(client, "alice"), try await Self.signIn(client, "bob"))
            }
        }
    }

    static func body(_ json: JSON) -> ByteBuffer { ByteBuffer(bytes: json.serialized()) }

    static func json(_ response: TestResponse) -> JSON? { try? JSON.parse(response.body.readableBytesView) }

    /// The session cookie a sign-in set, as a `Cookie:` header.
    static func cookie(_ response: TestResponse) -> String? {
        guard let setCookie = response.headers[.setCookie], let pair = setCookie.split(separator: ";").first else { return nil }
        return String(pair)
    }

    /// Signs in as `user` with the demo password; returns the Cookie header.
    static func signIn(_ client: some TestClientProtocol, _ user: String) async throws -> String {
        let response = try await client.execute(
            uri: "/api/sign-in", method: .post, headers: [.contentType: "application/json"],
            body: body(.obj(["username": .string(user), "password": .string("\(user)-demo")])))
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try #require(cookie(response))
    }

    // MARK: Without a broker

    @Test func healthzAnswers() async throws {
        let (app, _) = try Self.app(broker: nil)
        try await app.test(.live) { client in
            let response = try await client.execute(uri: "/healthz", method: .get)
            #expect(response.status == .ok)
            #expect(Self.json(response)?["status"]?.stringValue == "ok")
            #expect(Self.json(response)?["sessions"]?.int64Value == 0)
        }
    }

    @Test func servesThePage() async throws {
        let (app, _) = try Self.app(broker: nil)
        try await app.test(.live) { client in
            let page = try await client.execute(uri: "/", method: .get)
            #expect(page.status == .ok)
            #expect(String(buffer: page.body).contains("<title>Tandem</title>"))
            let script = try await client.execute(uri: "/app.js", method: .get)
            #expect(script.status == .ok)
            let sticker = try await client.execute(uri: "/stickers/star.svg", method: .get)
            #expect(sticker.status == .ok)
        }
    }

    @Test func withoutACookieNothingIsGiven() async throws {
        let (app, _) = try Self.app(broker: nil)
        try await app.test(.live) { client in
            let session = try await client.execute(uri: "/api/session", method: .get)
            #expect(session.status == .unauthorized)
            let socket = try await client.execute(uri: "/ws", method: .get)
            #expect(socket.status == .unauthorized)
            let forged = try await client.execute(uri: "/ws", method: .get, headers: [.cookie: "tandem_session=0123456789abcdef"])
            #expect(forged.status == .unauthorized)
        }
    }

    @Test(arguments: [
        ("not json", HTTPResponse.Status.badRequest),
        (#"{"username":"alice"}"#, .badRequest),
        (#"{"username":"not valid!","password":"x"}"#, .badRequest),
        (#"{"username":"alice","password":""}"#, .badRequest),
        (#"{"username":"alice","password":""# + String(repeating: "p", count: 5000) + #""}"#, .contentTooLarge),
    ])
    func malformedSignInIsRefused(_ text: String, _ status: HTTPResponse.Status) async throws {
        let (app, _) = try Self.app(broker: nil)
        try await app.test(.live) { client in
            let response = try await client.execute(uri: "/api/sign-in", method: .post, body: ByteBuffer(string: text))
            #expect(response.status == status)
            #expect(Self.json(response)?["error"]?.stringValue?.isEmpty == false)
            #expect(response.headers[.setCookie] == nil)
        }
    }

    @Test func anUnreachableBrokerIsSaidSo() async throws {
        let (app, _) = try Self.app(broker: nil)
        try await app.test(.live) { client in
            let response = try await client.execute(
                uri: "/api/sign-in", method: .post, body: Self.body(.obj(["username": "alice", "password": "alice-demo"])))
            #expect(response.status == .serviceUnavailable)
            #expect(Self.json(response)?["error"]?.stringValue?.contains("not reachable") == true)
        }
    }

    // MARK: With a broker and a coordinator

    @Test func wrongPasswordIsRefused() async throws {
        try await withBroker(.shipped) { broker in
            let (app, store) = try Self.app(broker: broker)
            try await app.test(.live) { client in
                let response = try await client.execute(
                    uri: "/api/sign-in", method: .post, body: Self.body(.obj(["username": "alice", "password": "wrong"])))
                #expect(response.status == .unauthorized)
                #expect(Self.json(response)?["error"]?.stringValue?.contains("wrong username or password") == true)
                #expect(response.headers[.setCookie] == nil)
                #expect(await store.count == 0)
            }
        }
    }

    @Test func signInSetsAStrictHttpOnlyCookieAndSignOutEndsTheMQTTSession() async throws {
        try await withBroker(.shipped) { broker in
            let watcher = try await TestPeer.connect(broker: broker, user: "carol", extraFilters: ["tandem/v1/presence/+/+"])
            defer { Task { await watcher.close() } }
            let (app, store) = try Self.app(broker: broker)
            try await app.test(.live) { client in
                let response = try await client.execute(
                    uri: "/api/sign-in", method: .post, headers: [.contentType: "application/json"],
                    body: Self.body(.obj(["username": "alice", "password": "alice-demo"])))
                #expect(response.status == .ok)
                #expect(Self.json(response)?["user"]?.stringValue == "alice")
                let setCookie = try #require(response.headers[.setCookie])
                #expect(setCookie.contains("HttpOnly"))
                #expect(setCookie.contains("SameSite=Strict"))
                #expect(setCookie.contains("Path=/"))
                let cookie = try #require(Self.cookie(response))

                // alice's own MQTT session says she is online.
                try await Self.presence(of: "alice", online: true, heardBy: watcher)
                let session = try await client.execute(uri: "/api/session", method: .get, headers: [.cookie: cookie])
                #expect(Self.json(session)?["user"]?.stringValue == "alice")

                let out = try await client.execute(uri: "/api/sign-out", method: .post, headers: [.cookie: cookie])
                #expect(out.status == .ok)
                #expect(out.headers[.setCookie]?.contains("Max-Age=0") == true)
                try await Self.presence(of: "alice", online: false, heardBy: watcher)
                #expect(await store.count == 0)
                let after = try await client.execute(uri: "/api/session", method: .get, headers: [.cookie: cookie])
                #expect(after.status == .unauthorized)
            }
        }
    }

    /// A process full of sessions (its open-file limit, ``SessionStore/sessionLimit(openFiles:)``)
    /// says so to the next sign-in (503) and takes one again once a session ended.
    @Test func aFullServerRefusesTheNextSignInUntilASessionEnds() async throws {
        try await withBroker(.shipped) { broker in
            let (app, store) = try Self.app(broker: broker, maxSessions: 1)
            try await app.test(.live) { client in
                let alice = try await Self.signIn(client, "alice")
                let bob = try await client.execute(
                    uri: "/api/sign-in", method: .post, headers: [.contentType: "application/json"],
                    body: Self.body(.obj(["username": "bob", "password": "bob-demo"])))
                #expect(bob.status == .serviceUnavailable)
                #expect(Self.json(bob)?["error"]?.stringValue?.contains("as many sessions as it can") == true)
                #expect(await store.count == 1)
                _ = try await client.execute(uri: "/api/sign-out", method: .post, headers: [.cookie: alice])
                _ = try await Self.signIn(client, "bob")
                #expect(await store.count == 1)
            }
        }
        // Two descriptors a session with libmosquitto's wake-up pair closed, four without.
        #expect(SessionStore.sessionLimit(openFiles: 20_000, perConnection: 1) == 8_884)
        #expect(SessionStore.sessionLimit(openFiles: 20_000, perConnection: 3) == 4_442)
        #expect(SessionStore.sessionLimit(openFiles: 65_536, perConnection: 3) == 14_688)
        #expect(SessionStore.sessionLimit(openFiles: 100) == 1)
        #expect(SessionStore.sessionLimit(openFiles: 20_000) == (MQTTClient.descriptorsPerConnection == 1 ? 8_884 : 4_442))
    }

    @Test func badAndOversizedFramesGetErrorFramesAndTheTabLives() async throws {
        try await withBroker(.shipped) { broker in
            let (app, _) = try Self.app(broker: broker)
            try await app.test(.live) { client in
                let cookie = try await Self.signIn(client, "alice")
                let codes = LockedBox<[String]>([])
                try await client.ws("/ws", configuration: .init(maxFrameSize: 1 << 16, additionalHeaders: [.cookie: cookie])) { inbound, outbound, _ in
                    try await outbound.write(.text("not json"))
                    try await outbound.write(.text(#"{"type":"edit","ref":"r1","room":"q","op":"update","sticker":"s1"}"#))
                    try await outbound.write(.text(#"{"type":"launch"}"#))
                    try await outbound.write(.text(String(repeating: "x", count: PageFrame.maxBytes + 10)))
                    try await outbound.write(.binary(ByteBuffer(bytes: [0, 1, 2])))
                    try await outbound.write(.text(#"{"type":"ping"}"#))
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message, let frame = try? JSON.parse(text) else { continue }
                        let type = frame["type"]?.stringValue ?? ""
                        if type == "error" { codes.update { $0.append(frame["code"]?.stringValue ?? "") } }
                        if type == "pong" { break }
                    }
                    try await outbound.close(.normalClosure, reason: nil)
                }
                #expect(codes.get() == ["invalid_frame", "invalid_frame", "unknown_type", "frame_too_large", "binary_frame"])

                // /metrics counts them, on the coordinator's conventions.
                let metrics = try await client.execute(uri: "/metrics", method: .get)
                #expect(metrics.status == .ok)
                #expect(metrics.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
                let text = String(buffer: metrics.body)
                for line in [
                    #"tandem_web_frame_errors_total{code="invalid_frame"} 2"#,
                    #"tandem_web_frame_errors_total{code="unknown_type"} 1"#,
                    #"tandem_web_frame_errors_total{code="frame_too_large"} 1"#,
                    #"tandem_web_frame_errors_total{code="binary_frame"} 1"#,
                    #"tandem_web_frames_received_total{type="ping"} 1"#,
                    #"tandem_web_sign_ins_total{result="ok"} 1"#,
                    "tandem_web_sessions 1",
                ] {
                    #expect(text.contains(line), "no \(line) in /metrics")
                }
            }
        }
    }

    @Test func aSessionSendingTooFastIsSlowedNotDropped() async throws {
        try await withBroker(.shipped) { broker in
            // Two frames a second, one at once: of 6 pings sent together, 5 wait their turn
            // (each is read only after the one before it has waited).
            let (app, store) = try Self.app(broker: broker, framesPerSecond: 2, frameBurst: 1)
            try await app.test(.live) { client in
                let cookie = try await Self.signIn(client, "alice")
                let pongs = LockedBox(0)
                try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: cookie])) { inbound, outbound, _ in
                    for _ in 0..<6 { try await outbound.write(.text(#"{"type":"ping"}"#)) }
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message, text.contains(#""pong""#) else { continue }
                        pongs.update { $0 += 1 }
                        if pongs.get() == 6 { break }
                    }
                    try await outbound.close(.normalClosure, reason: nil)
                }
                #expect(pongs.get() == 6)
                let text = store.metrics.registry.emitToString()
                #expect(text.contains("tandem_web_frames_paced_total 5"), "\(text)")
            }
        }
    }

    @Test func anEditGoesThroughTheCoordinatorAndComesBack() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            defer { Task { await coordinator.kill() } }
            let (app, _) = try Self.app(broker: broker)
            try await app.test(.live) { client in
                let cookie = try await Self.signIn(client, "alice")
                let seen = LockedBox<(receipt: JSON?, room: JSON?)>((nil, nil))
                try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: cookie])) { inbound, outbound, _ in
                    try await outbound.write(.text(#"{"type":"watch","room":"web-q1"}"#))
                    try await outbound.write(.text(#"{"type":"edit","ref":"r1","room":"web-q1","op":"create","sticker":"s1","image":"star","frame":{"x":10,"y":20,"width":100,"height":100}}"#))
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message, let frame = try? JSON.parse(text) else { continue }
                        if frame["type"]?.stringValue == "receipt" { seen.update { $0.receipt = frame } }
                        if frame["type"]?.stringValue == "room", frame["known"]?.boolValue == true,
                           case .array(let stickers)? = frame["stickers"], stickers.contains(where: { $0["id"]?.stringValue == "s1" }) {
                            seen.update { $0.room = frame }
                        }
                        if seen.get().receipt != nil, seen.get().room != nil { break }
                    }
                    try await outbound.close(.normalClosure, reason: nil)
                }
                #expect(seen.get().receipt?["ref"]?.stringValue == "r1")
                #expect(seen.get().receipt?["status"]?.stringValue == "accepted")
                #expect(seen.get().room?["owner"]?.stringValue == "alice")
            }
        }
    }

    /// A tab that starts watching a room gets each version of it once: not the room as
    /// its session's client holds it and then again as the stream's first update (a
    /// second tab of the same session) or as the retained snapshot that confirms it.
    /// (The room stays quiet and bob edits nothing: a change that did not apply, or an
    /// edit of his own, would show a version again, rightly.)
    @Test(.timeLimit(.minutes(1)))
    func aWatchedRoomIsShownOnceAVersion() async throws {
        try await Self.withAliceAndBob { client, aliceCookie, bobCookie in
            let roomId = "web-once"
            let aliceFrames = LockedBox<[JSON]>([])
            try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: aliceCookie])) { aliceIn, alice, _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await message in aliceIn.messages(maxSize: 1 << 20) {
                            if case .text(let text) = message, let frame = try? JSON.parse(text) { aliceFrames.update { $0.append(frame) } }
                        }
                    }
                    try await alice.write(.text(#"{"type":"watch","room":"\#(roomId)"}"#))
                    try await alice.write(.text(#"{"type":"edit","ref":"c1","room":"\#(roomId)","op":"create","sticker":"s1","image":"star","frame":{"x":10,"y":20,"width":100,"height":100}}"#))
                    try await alice.write(.text(#"{"type":"member","ref":"i1","room":"\#(roomId)","op":"invite","member":"bob"}"#))
                    for ref in ["c1", "i1"] {
                        let receipt = try await Self.frame(in: aliceFrames) { $0["type"]?.stringValue == "receipt" && $0["ref"]?.stringValue == ref }
                        #expect(receipt["status"]?.stringValue == "accepted", "\(receipt.text)")
                    }
                    // Bob's first tab, then a second one while the first still shows the room.
                    let bobFrames = [LockedBox<[JSON]>([]), LockedBox<[JSON]>([])]
                    @Sendable func bobTab(_ index: Int, then: @escaping @Sendable () async throws -> Void) async throws {
                        try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: bobCookie])) { bobIn, bob, _ in
                            try await withThrowingTaskGroup(of: Void.self) { tab in
                                tab.addTask {
                                    for try await message in bobIn.messages(maxSize: 1 << 20) {
                                        if case .text(let text) = message, let frame = try? JSON.parse(text), frame["type"]?.stringValue == "room" {
                                            bobFrames[index].update { $0.append(frame) }
                                        }
                                    }
                                }
                                try await bob.write(.text(#"{"type":"watch","room":"\#(roomId)"}"#))
                                _ = try await Self.frame(in: bobFrames[index]) { frame in
                                    guard case .array(let stickers)? = frame["stickers"] else { return false }
                                    return stickers.contains { $0["id"]?.stringValue == "s1" }
                                }
                                // Whatever else was coming for the watch has come by then.
                                try await Task.sleep(for: .seconds(1))
                                try await then()
                                try await bob.close(.normalClosure, reason: nil)
                                tab.cancelAll()
                            }
                        }
                    }
                    try await bobTab(0) { try await bobTab(1) {} }
                    for (index, frames) in bobFrames.enumerated() {
                        let versions = frames.get().compactMap { $0["version"]?.int64Value }
                        #expect(!versions.isEmpty)
                        #expect(Set(versions).count == versions.count, "bob's tab \(index + 1) was shown the versions \(versions)")
                    }
                    try await alice.close(.normalClosure, reason: nil)
                    group.cancelAll()
                }
            }
        }
    }

    /// Undo, redo, a refused undo, the room's history, a restore and cursors, through two
    /// people's tabs: alice's edits are undone by her session's client, bob's cursor
    /// reaches alice's tab, and the restore reaches both.
    @Test(.timeLimit(.minutes(2)))
    func undoRedoHistoryRestoreAndCursorsThroughTabs() async throws {
        try await Self.withAliceAndBob { client, aliceCookie, bobCookie in
            let roomId = "web-undo"
            let aliceFrames = LockedBox<[JSON]>([]), bobFrames = LockedBox<[JSON]>([])
            try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: aliceCookie])) { aliceIn, alice, _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await message in aliceIn.messages(maxSize: 1 << 20) {
                            if case .text(let text) = message, let frame = try? JSON.parse(text) { aliceFrames.update { $0.append(frame) } }
                        }
                    }
                    @Sendable func send(_ text: String) async throws { try await alice.write(.text(text)) }
                    @Sendable func receipt(_ ref: String) async throws -> JSON {
                        try await Self.frame(in: aliceFrames) { $0["type"]?.stringValue == "receipt" && $0["ref"]?.stringValue == ref }
                    }
                    @Sendable func undoResult(_ ref: String) async throws -> JSON {
                        try await Self.frame(in: aliceFrames) { $0["type"]?.stringValue == "undoResult" && $0["ref"]?.stringValue == ref }
                    }
                    /// The next room frame (after what was read so far) where s1 is at `x`.
                    @Sendable func room(in frames: LockedBox<[JSON]>, from: Int, s1At x: Double) async throws -> JSON {
                        try await Self.frame(in: frames, from: from) { frame in
                            guard frame["type"]?.stringValue == "room", case .array(let stickers)? = frame["stickers"] else { return false }
                            return stickers.first { $0["id"]?.stringValue == "s1" }?["frame"]?["x"]?.doubleValue == x
                        }
                    }

                    try await send(#"{"type":"watch","room":"\#(roomId)"}"#)
                    try await send(#"{"type":"edit","ref":"c1","room":"\#(roomId)","op":"create","sticker":"s1","image":"star","frame":{"x":10,"y":20,"width":100,"height":100}}"#)
                    try await send(#"{"type":"edit","ref":"c2","room":"\#(roomId)","op":"release","sticker":"s1"}"#)
                    try await send(#"{"type":"member","ref":"i1","room":"\#(roomId)","op":"invite","member":"bob"}"#)
                    for ref in ["c1", "c2", "i1"] { #expect(try await receipt(ref)["status"]?.stringValue == "accepted") }
                    var mark = aliceFrames.get().count
                    // A drag: its first update, two that continue it, the release.
                    try await send(#"{"type":"edit","ref":"u1","room":"\#(roomId)","op":"update","sticker":"s1","frame":{"x":100,"y":20,"width":100,"height":100}}"#)
                    try await send(#"{"type":"edit","ref":"u2","room":"\#(roomId)","op":"update","sticker":"s1","frame":{"x":200,"y":20,"width":100,"height":100},"continues":true}"#)
                    try await send(#"{"type":"edit","ref":"u3","room":"\#(roomId)","op":"update","sticker":"s1","frame":{"x":300,"y":20,"width":100,"height":100},"continues":true}"#)
                    try await send(#"{"type":"edit","ref":"u4","room":"\#(roomId)","op":"release","sticker":"s1"}"#)
                    for ref in ["u1", "u4"] { #expect(try await receipt(ref)["status"]?.stringValue == "accepted") }
                    // The continuing updates are answered only when refused (the page shows
                    // the drag itself); their receipts would have come before the release's.
                    #expect(!aliceFrames.get().contains { $0["type"]?.stringValue == "receipt" && ["u2", "u3"].contains($0["ref"]?.stringValue ?? "") })
                    _ = try await room(in: aliceFrames, from: mark, s1At: 300)
                    _ = try await Self.frame(in: aliceFrames, from: mark) { $0["type"]?.stringValue == "room" && $0["canUndo"] == .bool(true) }

                    // One undo takes back the whole drag, and it can be redone.
                    mark = aliceFrames.get().count
                    try await send(#"{"type":"undo","ref":"z1","room":"\#(roomId)"}"#)
                    do { let r = try await undoResult("z1"); #expect(r["status"]?.stringValue == "accepted", "\(r)") }
                    _ = try await room(in: aliceFrames, from: mark, s1At: 10)
                    _ = try await Self.frame(in: aliceFrames, from: mark) { $0["type"]?.stringValue == "room" && $0["canRedo"] == .bool(true) }
                    // Redo: it is where the drag ended again.
                    mark = aliceFrames.get().count
                    try await send(#"{"type":"redo","ref":"y1","room":"\#(roomId)"}"#)
                    do { let r = try await undoResult("y1"); #expect(r["status"]?.stringValue == "accepted", "\(r)") }
                    _ = try await room(in: aliceFrames, from: mark, s1At: 300)

                    // The history: newest first, with who did what.
                    try await send(#"{"type":"roomHistory","room":"\#(roomId)"}"#)
                    let history = try await Self.frame(in: aliceFrames) { $0["type"]?.stringValue == "roomHistory" }
                    guard case .array(let entries)? = history["entries"] else { Issue.record("no entries: \(history)"); return }
                    let versions = entries.compactMap { $0["version"]?.int64Value }
                    #expect(versions == versions.sorted(by: >) && versions.count >= 6, "\(versions)")
                    #expect(entries.first?["userId"]?.stringValue == "alice")
                    let created = try #require(entries.first { $0["type"]?.stringValue == "create" }?["version"]?.int64Value)
                    #expect(entries.contains { $0["type"]?.stringValue == "invite" })

                    let redone = aliceFrames.get().count
                    try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: bobCookie])) { bobIn, bob, _ in
                        try await withThrowingTaskGroup(of: Void.self) { bobGroup in
                            bobGroup.addTask {
                                for try await message in bobIn.messages(maxSize: 1 << 20) {
                                    if case .text(let text) = message, let frame = try? JSON.parse(text) { bobFrames.update { $0.append(frame) } }
                                }
                            }
                            try await bob.write(.text(#"{"type":"watch","room":"\#(roomId)"}"#))
                            _ = try await room(in: bobFrames, from: 0, s1At: 300)

                            // bob holds s1: alice's undo is refused, and says who holds it.
                            try await bob.write(.text(#"{"type":"edit","ref":"b1","room":"\#(roomId)","op":"acquire","sticker":"s1"}"#))
                            _ = try await Self.frame(in: aliceFrames, from: redone) { frame in
                                guard frame["type"]?.stringValue == "room", case .array(let stickers)? = frame["stickers"] else { return false }
                                return stickers.first { $0["id"]?.stringValue == "s1" }?["owner"]?.stringValue == "bob"
                            }
                            try await send(#"{"type":"undo","ref":"z2","room":"\#(roomId)"}"#)
                            let refused = try await undoResult("z2")
                            #expect(refused["status"]?.stringValue == "rejected")
                            #expect(refused["code"]?.stringValue == "owned_by_other")
                            #expect(refused["holder"]?.stringValue == "bob")
                            #expect(refused["sticker"]?.stringValue == "s1")
                            // A continuing update refused is answered like any edit.
                            try await send(#"{"type":"edit","ref":"u5","room":"\#(roomId)","op":"update","sticker":"s1","frame":{"x":400,"y":20,"width":100,"height":100},"continues":true}"#)
                            let continuing = try await receipt("u5")
                            #expect(continuing["status"]?.stringValue == "rejected")
                            #expect(continuing["code"]?.stringValue == "owned_by_other")
                            try await bob.write(.text(#"{"type":"edit","ref":"b2","room":"\#(roomId)","op":"release","sticker":"s1"}"#))
                            _ = try await Self.frame(in: bobFrames) { $0["type"]?.stringValue == "receipt" && $0["ref"]?.stringValue == "b2" }

                            // bob's pointer reaches alice's tab, and so does its leaving.
                            try await bob.write(.text(#"{"type":"cursor","room":"\#(roomId)","x":100,"y":200.5}"#))
                            let cursor = try await Self.frame(in: aliceFrames) { $0["type"]?.stringValue == "cursor" && $0["x"] != .null }
                            #expect(cursor["user"]?.stringValue == "bob")
                            #expect(cursor["x"]?.doubleValue == 100)
                            #expect(cursor["y"]?.doubleValue == 200.5)
                            try await bob.write(.text(#"{"type":"cursor","room":"\#(roomId)"}"#))
                            let left = try await Self.frame(in: aliceFrames) { $0["type"]?.stringValue == "cursor" && $0["x"] == .null }
                            #expect(left["user"]?.stringValue == "bob")

                            // The refused undo stayed on the stack: once bob lets go it goes
                            // through, then the create's; then nothing (the two updates that
                            // continued the drag were never on it).
                            let beforeUndos = aliceFrames.get().count
                            try await send(#"{"type":"undo","ref":"z3","room":"\#(roomId)"}"#)
                            try await send(#"{"type":"undo","ref":"z4","room":"\#(roomId)"}"#)
                            try await send(#"{"type":"undo","ref":"z5","room":"\#(roomId)"}"#)
                            do { let r = try await undoResult("z3"); #expect(r["status"]?.stringValue == "accepted", "\(r)") }
                            do { let r = try await undoResult("z4"); #expect(r["status"]?.stringValue == "accepted", "\(r)") }
                            do { let r = try await undoResult("z5"); #expect(r["status"]?.stringValue == "nothing", "\(r)") }
                            // ...and back: the create again (under a new id), then the drag.
                            try await send(#"{"type":"redo","ref":"y2","room":"\#(roomId)"}"#)
                            try await send(#"{"type":"redo","ref":"y3","room":"\#(roomId)"}"#)
                            do { let r = try await undoResult("y2"); #expect(r["status"]?.stringValue == "accepted", "\(r)") }
                            do { let r = try await undoResult("y3"); #expect(r["status"]?.stringValue == "accepted", "\(r)") }
                            _ = try await Self.frame(in: aliceFrames, from: beforeUndos) { frame in
                                guard frame["type"]?.stringValue == "room", case .array(let stickers)? = frame["stickers"] else { return false }
                                return stickers.contains { $0["id"]?.stringValue?.hasPrefix("s1-") == true && $0["frame"]?["x"]?.doubleValue == 300 }
                                    && !stickers.contains { $0["id"]?.stringValue == "s1" }
                            }

                            // alice restores the room to right after the create: both see it.
                            let bobMark = bobFrames.get().count
                            let aliceMark = aliceFrames.get().count
                            try await send(#"{"type":"restore","ref":"r1","room":"\#(roomId)","version":\#(created)}"#)
                            #expect(try await receipt("r1")["status"]?.stringValue == "accepted")
                            _ = try await room(in: bobFrames, from: bobMark, s1At: 10)
                            _ = try await room(in: aliceFrames, from: aliceMark, s1At: 10)
                            // A restore clears the undo stacks.
                            _ = try await Self.frame(in: aliceFrames, from: aliceMark) {
                                $0["type"]?.stringValue == "room" && $0["canUndo"] == .bool(false) && $0["canRedo"] == .bool(false)
                            }

                            // Bad ones get error frames; the tab lives on.
                            try await send(#"{"type":"restore","ref":"r2","room":"\#(roomId)","version":0}"#)
                            try await send(#"{"type":"cursor","room":"\#(roomId)","x":5000,"y":1}"#)
                            try await send(#"{"type":"ping"}"#)
                            _ = try await Self.frame(in: aliceFrames) { $0["type"]?.stringValue == "pong" }
                            let errors = aliceFrames.get().filter { $0["type"]?.stringValue == "error" }
                            #expect(errors.map { $0["code"]?.stringValue } == ["invalid_frame", "invalid_frame"], "\(errors)")
                            try await bob.close(.normalClosure, reason: nil)
                            bobGroup.cancelAll()
                        }
                    }
                    try await alice.close(.normalClosure, reason: nil)
                    group.cancelAll()
                }
            }
        }
    }

    /// The first frame in `box` from index `from` on that `matches`, waiting up to 20 s for it.
    static func frame(in box: LockedBox<[JSON]>, from: Int = 0, _ matches: @escaping (JSON) -> Bool) async throws -> JSON {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let frames = box.get()
            if from < frames.count, let found = frames[from...].first(where: matches) { return found }
            try await Task.sleep(for: .milliseconds(10))
        }
        struct NoSuchFrame: Error, CustomStringConvertible { let description: String }
        throw NoSuchFrame(description: "no such frame in 20 s; the last ones: \(box.get().suffix(5).map(\.text))")
    }

    /// A page that stops reading for a few seconds while its room changes 1,500 times
    /// (some 12 MB of room frames): the sockets' buffers fill (the page's send buffer is
    /// bounded: ``WebServer/pageSendBufferBytes``) and the tab's writer waits, so once the
    /// page reads again it gets the room's versions in order, not every one, ending with
    /// the latest, and its tab still answers.
    @Test(.timeLimit(.minutes(2)))
    func aPageThatStopsReadingGetsTheRoomInOrderThenTheLatest() async throws {
        // No per-person limit: alice sends some 500 events a second.
        try await Self.withAliceAndBob(coordinatorArguments: ["--rate-limit", "0"], framesPerSecond: 1000, frameBurst: 1000) { client, aliceCookie, bobCookie in
            let roomId = "web-slow-page"
            // Some 8 KB a room frame.
            let stickers = 50, updates = 1500
            let aliceFrames = LockedBox<[JSON]>([])
            try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: aliceCookie])) { aliceIn, alice, _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await message in aliceIn.messages(maxSize: 1 << 20) {
                            // Only receipts are looked at (parsing every room frame would hold the test up).
                            if case .text(let text) = message, text.hasPrefix(#"{"type":"receipt""#), let frame = try? JSON.parse(text) {
                                aliceFrames.update { $0.append(frame) }
                            }
                        }
                    }
                    @Sendable func send(_ text: String) async throws { try await alice.write(.text(text)) }
                    @Sendable func accepted(_ ref: String) async throws {
                        let receipt = try await Self.frame(in: aliceFrames) {
                            $0["type"]?.stringValue == "receipt" && $0["ref"]?.stringValue == ref
                        }
                        #expect(receipt["status"]?.stringValue == "accepted", "\(receipt.text)")
                    }
                    @Sendable func frame(_ x: Int) -> String { #"{"x":\#(x),"y":20,"width":100,"height":100}"# }
                    try await send(#"{"type":"watch","room":"\#(roomId)"}"#)
                    for i in 0..<stickers {
                        try await send(#"{"type":"edit","ref":"c\#(i)","room":"\#(roomId)","op":"create","sticker":"s\#(i)","image":"star","frame":\#(frame(i))}"#)
                    }
                    try await send(#"{"type":"member","ref":"i1","room":"\#(roomId)","op":"invite","member":"bob"}"#)
                    for i in 0..<stickers { try await accepted("c\(i)") }
                    try await accepted("i1")

                    try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: bobCookie])) { bobIn, bob, _ in
                        var messages = bobIn.messages(maxSize: 1 << 20).makeAsyncIterator()
                        func nextRoom() async throws -> JSON? {
                            while let message = try await messages.next() {
                                if case .text(let text) = message, let frame = try? JSON.parse(text), frame["type"]?.stringValue == "room" {
                                    return frame
                                }
                            }
                            return nil
                        }
                        try await bob.write(.text(#"{"type":"watch","room":"\#(roomId)"}"#))
                        var first = try #require(try await nextRoom())
                        while case .array(let shown)? = first["stickers"], shown.count < stickers {
                            first = try #require(try await nextRoom())
                        }
                        // Bob's page reads nothing while alice moves every sticker, again and
                        // again, a few milliseconds apart.
                        for u in 1...updates {
                            try await send(#"{"type":"edit","ref":"u\#(u)","room":"\#(roomId)","op":"update","sticker":"s\#(u % stickers)","frame":\#(frame(1000 + u))}"#)
                            try await Task.sleep(for: .milliseconds(2))
                        }
                        try await accepted("u\(updates)")
                        // Then it reads: versions never go back (one may come twice: a
                        // change that did not follow the version held shows the room again
                        // as it was), the last is where alice left it.
                        var version = try #require(first["version"]?.int64Value)
                        var roomFrames = 0, bytes = 0  // once it reads again
                        while true {
                            let room = try #require(try await nextRoom())
                            bytes += room.text.utf8.count
                            let next = try #require(room["version"]?.int64Value)
                            #expect(next >= version, "version \(next) after \(version)")
                            version = next
                            roomFrames += 1
                            guard case .array(let shown)? = room["stickers"] else { continue }
                            let last = shown.first { $0["id"]?.stringValue == "s\(updates % stickers)" }
                            if last?["frame"]?["x"]?.doubleValue == Double(1000 + updates) { break }
                        }
                        #expect(roomFrames < updates / 4, "\(bytes) bytes in \(roomFrames) room frames")
                        // And the tab still answers.
                        try await bob.write(.text(#"{"type":"edit","ref":"b1","room":"\#(roomId)","op":"update","sticker":"s0","frame":\#(frame(5))}"#))
                        var answered = false
                        while let message = try await messages.next() {
                            if case .text(let text) = message, text.contains(#""ref":"b1""#) { answered = true; break }
                        }
                        #expect(answered)
                        try await bob.close(.normalClosure, reason: nil)
                    }
                    try await alice.close(.normalClosure, reason: nil)
                    group.cancelAll()
                }
            }
        }
    }

    @Test func theLastTabClosingEndsTheSession() async throws {
        try await withBroker(.shipped) { broker in
            let watcher = try await TestPeer.connect(broker: broker, user: "carol", extraFilters: ["tandem/v1/presence/+/+"])
            defer { Task { await watcher.close() } }
            let (app, store) = try Self.app(broker: broker, tabGrace: .seconds(2))
            try await app.test(.live) { client in
                let cookie = try await Self.signIn(client, "bob")
                try await client.ws("/ws", configuration: .init(additionalHeaders: [.cookie: cookie])) { inbound, outbound, _ in
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        if case .text(let text) = message, text.contains("hello") { break }
                    }
                    try await outbound.close(.normalClosure, reason: nil)
                }
                try await Self.presence(of: "bob", online: false, heardBy: watcher)
                let after = try await client.execute(uri: "/api/session", method: .get, headers: [.cookie: cookie])
                #expect(after.status == .unauthorized)
                #expect(await store.count == 0)
            }
        }
    }

    @Test func aSessionWithoutATabEndsAndSaysOffline() async throws {
        try await withBroker(.shipped) { broker in
            let watcher = try await TestPeer.connect(broker: broker, user: "carol", extraFilters: ["tandem/v1/presence/+/+"])
            defer { Task { await watcher.close() } }
            // The grace runs out in the session's own timer: its end must still say offline.
            let (app, store) = try Self.app(broker: broker, tabGrace: .milliseconds(300))
            try await app.test(.live) { client in
                let cookie = try await Self.signIn(client, "bob")
                try await Self.presence(of: "bob", online: false, heardBy: watcher)
                let after = try await client.execute(uri: "/api/session", method: .get, headers: [.cookie: cookie])
                #expect(after.status == .unauthorized)
                #expect(await store.count == 0)
            }
        }
    }

    /// Waits until `watcher` heard a presence of `user`'s web client saying `online`.
    static func presence(of user: String, online: Bool, heardBy watcher: TestPeer) async throws {
        let prefix = "tandem/v1/presence/\(user)/web-"
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            let heard = watcher.heard(from: 0).filter { $0.topic.hasPrefix(prefix) }
            if heard.contains(where: { (try? JSON.parse($0.payload))?["online"]?.boolValue == online }) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("no presence of \(user) saying online: \(online)")
    }
}
