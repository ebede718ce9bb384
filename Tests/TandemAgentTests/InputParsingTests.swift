import Testing
import TandemAgent
import TandemCore

@Suite struct DMInputTests {
    @Test(arguments: [
        ("request bob", DMInput.command(.request, peer: "bob", text: nil)),
        ("request bob hi there", .command(.request, peer: "bob", text: "hi there")),
        ("send bob hello   world  ", .command(.message, peer: "bob", text: "hello   world")),
        ("  SEND\tbob x", .command(.message, peer: "bob", text: "x")),
        ("accept bob", .command(.accept, peer: "bob", text: nil)),
        ("decline bob", .command(.decline, peer: "bob", text: nil)),
        ("read bob", .command(.read, peer: "bob", text: nil)),
        ("leave bob", .command(.leave, peer: "bob", text: nil)),
        ("list", .list),
        ("show carol", .show(peer: "carol")),
        ("help", .help),
        ("quit", .quit),
        ("", .nothing),
        ("   ", .nothing),
        ("# a comment", .nothing),
    ])
    func good(line: String, expected: DMInput) throws {
        #expect(try DMInput.parse(line).get() == expected)
    }

    @Test(arguments: [
        ("send bob", "missing TEXT"),
        ("send", "missing PEER"),
        ("accept", "too few arguments"),
        ("accept bob carol", "too many arguments"),
        ("read b@b", "is not valid"),
        ("frobnicate bob", "unknown command \"frobnicate\""),
        ("show", "too few arguments"),
        ("list all", "too many arguments"),
    ])
    func bad(line: String, fragment: String) {
        guard case .failure(let error) = DMInput.parse(line) else {
            Issue.record("\(line) parsed")
            return
        }
        #expect(error.message.contains(fragment), "\(error.message)")
    }

    @Test func textOverTheLimitIsRefusedBeforeSending() {
        let line = "send bob " + String(repeating: "x", count: WireLimits.maxDMTextBytes + 1)
        guard case .failure(let error) = DMInput.parse(line) else {
            Issue.record("parsed")
            return
        }
        #expect(error.message.contains("limit is 4096"))
    }
}

@Suite struct RoomInputTests {
    @Test(arguments: [
        ("create s1 star.png 10 10 50 50", RoomInput.create(id: "s1", image: "star.png", frame: Frame(x: 10, y: 10, width: 50, height: 50))),
        ("create s1 star.png -1.5 0 0.5 2", .create(id: "s1", image: "star.png", frame: Frame(x: -1.5, y: 0, width: 0.5, height: 2))),
        ("move s1 20 30", .move(id: "s1", x: 20, y: 30)),
        ("resize s1 5 6", .resize(id: "s1", width: 5, height: 6)),
        ("acquire s1", .acquire(id: "s1")),
        ("release s1", .release(id: "s1")),
        ("delete s1", .delete(id: "s1")),
        ("show", .show),
        ("help", .help),
        ("quit", .quit),
        ("", .nothing),
    ])
    func good(line: String, expected: RoomInput) throws {
        #expect(try RoomInput.parse(line).get() == expected)
    }

    @Test(arguments: [
        ("create s1 star.png 10 10 50", "too few arguments"),
        ("create s1 star.png 10 10 50 50 7", "too many arguments"),
        ("create s1 star.png 10 10 0 50", "W must be greater than 0"),
        ("create s1 star.png x 10 5 5", "X must be a number"),
        ("create s1 star.png nan 10 5 5", "X must be a number"),
        ("create s1 star.png inf 10 5 5", "X must be a number"),
        ("create s/1 star.png 1 1 5 5", "ID \"s/1\" is not valid"),
        ("move s1 1", "too few arguments"),
        ("resize s1 -1 5", "W must be greater than 0"),
        ("acquire", "too few arguments"),
        ("delete s1 s2", "too many arguments"),
        ("teleport s1", "unknown command"),
    ])
    func bad(line: String, fragment: String) {
        guard case .failure(let error) = RoomInput.parse(line) else {
            Issue.record("\(line) parsed")
            return
        }
        #expect(error.message.contains(fragment), "\(error.message)")
    }

    @Test func moveAndResizeSendTheWholeFrame() throws {
        let shown = Sticker(id: "s1", image: "star.png", frame: Frame(x: 1, y: 2, width: 30, height: 40),
                            owner: nil, createdBy: "bob", updatedBy: "bob", updatedAt: 1)
        let lookup: (String) -> Sticker? = { $0 == "s1" ? shown : nil }
        let move = try #require(try RoomInput.move(id: "s1", x: 7, y: 8).event(eventId: "e1", timestamp: 5, shown: lookup))
        #expect(move.type == .update)
        #expect(move.frame == Frame(x: 7, y: 8, width: 30, height: 40))
        let resize = try #require(try RoomInput.resize(id: "s1", width: 9, height: 10).event(eventId: "e2", timestamp: 5, shown: lookup))
        #expect(resize.frame == Frame(x: 1, y: 2, width: 9, height: 10))
        #expect(throws: InputError.self) { try RoomInput.move(id: "zz", x: 1, y: 1).event(eventId: "e3", timestamp: 5, shown: lookup) }
    }
}
