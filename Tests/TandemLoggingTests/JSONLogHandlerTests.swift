import Foundation
import Logging
import Synchronization
import Testing
@testable import TandemLogging

/// `--log-format json`: every line one JSON object a log shipper can read.
@Suite struct JSONLogHandlerTests {
    /// A logger whose lines are collected instead of written to stderr.
    func logger(level: Logger.Level = .trace, configure: (inout JSONLogHandler) -> Void = { _ in }) -> (Logger, Lines) {
        let lines = Lines()
        var handler = JSONLogHandler(label: "tandem.test", output: .lines { lines.append($0) }, metadataProvider: nil)
        handler.logLevel = level
        configure(&handler)
        return (Logger(label: "tandem.test") { _ in handler }, lines)
    }

    final class Lines: Sendable {
        let collected = Mutex<[String]>([])
        func append(_ line: String) { collected.withLock { $0.append(line) } }
        var all: [String] { collected.withLock { $0 } }
    }

    func parse(_ line: String) throws -> [String: Any] {
        #expect(line.hasSuffix("\n"))
        #expect(line.dropLast().contains("\n") == false, "one line: \(line)")
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
        return try #require(object as? [String: Any])
    }

    @Test func aLineHasTheFixedMembersThenTheMetadata() throws {
        let (logger, collected) = logger(level: .info) { $0[metadataKey: "instance"] = "box-1" }
        logger.info("receipt", metadata: [
            "user": "alice", "room": "r1", "event.id": "e1",
            "nested": ["list": ["a", "b"], "count": .stringConvertible(3)],
            "level": "clash",
        ])
        logger.debug("not at this level")
        let lines = collected.all
        #expect(lines.count == 1)
        let record = try parse(lines[0])
        #expect(record["level"] as? String == "info")
        #expect(record["label"] as? String == "tandem.test")
        #expect(record["message"] as? String == "receipt")
        #expect(record["source"] as? String == "TandemLoggingTests")
        #expect(record["user"] as? String == "alice")
        #expect(record["room"] as? String == "r1")
        #expect(record["event.id"] as? String == "e1")
        #expect(record["instance"] as? String == "box-1")
        #expect(record["_level"] as? String == "clash")
        let nested = try #require(record["nested"] as? [String: Any])
        #expect(nested["list"] as? [String] == ["a", "b"])
        #expect(nested["count"] as? String == "3")
        let ts = try #require(record["ts"] as? String)
        #expect(ts.count == 24 && ts.hasSuffix("Z"), "\(ts)")
        #expect(lines[0].hasPrefix(#"{"ts":"#))
    }

    @Test func errorsAndAwkwardTextStayValidJSON() throws {
        struct Broken: Error, CustomStringConvertible {
            var description: String { "disk \"full\"\n\tat\u{01} /data ✓" }
        }
        let (logger, lines) = logger()
        logger.error("commit failed \\ \"quoted\"\r\n", error: Broken(), metadata: ["path": "/tmp/\u{7F}x"])
        let record = try parse(try #require(lines.all.first))
        #expect(record["message"] as? String == "commit failed \\ \"quoted\"\r\n")
        #expect(record["error.message"] as? String == "disk \"full\"\n\tat\u{01} /data ✓")
        #expect((record["error.type"] as? String)?.hasSuffix("Broken") == true)
        #expect(record["path"] as? String == "/tmp/\u{7F}x")
    }

    @Test(arguments: [
        (0, 0, "1970-01-01T00:00:00.000Z"),
        (1_795_296_676, 437, "2026-11-21T21:31:16.437Z"),
        (951_782_400, 5, "2000-02-29T00:00:00.005Z"),
    ])
    func timestampsAreUTCWithMilliseconds(seconds: Int, milliseconds: Int, expected: String) {
        #expect(JSONLogHandler.iso8601(seconds: seconds, milliseconds: milliseconds) == expected)
    }

    @Test func theFormatNamesItsHandler() {
        #expect(LogFormat(rawValue: "json") == .json)
        #expect(LogFormat(rawValue: "xml") == nil)
        #expect(LogFormat.json.handler(label: "x", level: .debug) is JSONLogHandler)
        #expect(LogFormat.text.handler(label: "x", level: .debug).logLevel == .debug)
    }
}
