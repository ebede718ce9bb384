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
        #expect(try DMInput.parse(line) == expected)
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
        guard let error = inputError({ try DMInput.parse(line) }) else {
            Issue.record("\(line) parsed")
            return
        }
        #expect(error.message.contains(fragment), "\(error.message)")
    }

    @Test func textOverTheLimitIsRefusedBeforeSending() {
        let line = "send bob " + String(repeating: "x", count: WireLimits.maxDMTextBytes + 1)
        guard let error = inputError({ try DMInput.parse(line) }) else {
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
        ("history", .history(before: nil)),
        ("history 12", .history(before: 12)),
        ("restore 3", .restore(version: 3)),
        ("UNDO", .undo),
        ("redo", .redo),
        ("show", .show),
        ("help", .help),
        ("quit", .quit),
        ("", .nothing),
    ])
    func good(line: String, expected: RoomInput) throws {
        #expect(try RoomInput.parse(line) == expected)
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
        ("history 0", "BEFORE must be a version, a whole number from 1, not \"0\""),
        ("history x", "BEFORE must be a version"),
        ("history 3 4", "too many arguments; usage: history [BEFORE]"),
        ("restore", "too few arguments; usage: restore VERSION"),
        ("restore -2", "VERSION must be a version, a whole number from 1, not \"-2\""),
        ("restore 2.5", "VERSION must be a version"),
        ("restore 2 3", "too many arguments"),
        ("undo s1", "too many arguments; usage: undo"),
        ("redo all", "too many arguments; usage: redo"),
    ])
    func bad(line: String, fragment: String) {
        guard let error = inputError({ try RoomInput.parse(line) }) else {
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

    @Test func restoreSendsARestoreAndTheOthersAreNotEvents() throws {
        let none: (String) -> Sticker? = { _ in nil }
        let restore = try #require(try RoomInput.restore(version: 4).event(eventId: "e1", timestamp: 5, shown: none))
        #expect(restore == EditEvent(eventId: "e1", restoringTo: 4, timestamp: 5))
        #expect(restore.json().text == #"{"eventId":"e1","type":"restore","timestamp":5,"version":4}"#)
        for input in [RoomInput.history(before: nil), .undo, .redo] {
            #expect(try input.event(eventId: "e2", timestamp: 5, shown: none) == nil)
        }
    }
}

/// What parsing a line threw, nil when it parsed.
func inputError<T>(_ parse: () throws -> T) -> InputError? {
    do {
        _ = try parse()
        return nil
    } catch {
        return error as? InputError
    }
}
