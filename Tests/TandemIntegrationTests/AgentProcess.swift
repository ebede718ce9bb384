import Foundation
import TandemCore
import TestSupport

/// `tandem-agent` as a person runs it against the test broker, as one of the shipped
/// demo users.
struct Agent {
    let broker: MosquittoBroker
    let user: String

    /// The connection flags for `user` on the shipped broker.
    var connection: [String] {
        ["--host", broker.host, "--port", String(broker.port), "--username", user, "--password", "\(user)-demo"]
    }

    /// Starts `tandem-agent SUBCOMMAND ... --json` (or without `--json`); stdin from a
    /// file when given, the way a script pipes commands in.
    func start(_ arguments: [String], json: Bool = true, standardInput: String? = nil) throws -> ChildProcess {
        try ChildProcess(
            CoordinatorProcess.binary("tandem-agent"), arguments + connection + (json ? ["--json"] : []),
            standardInput: standardInput)
    }

    /// Runs `tandem-agent SUBCOMMAND ...` to completion.
    func run(_ arguments: [String], json: Bool = true, standardInput: String? = nil, timeout: Duration = .seconds(60)) async throws -> ChildProcess {
        let child = try start(arguments, json: json, standardInput: standardInput)
        guard await child.waitForExit(timeout: timeout) != nil else {
            child.signal(SIGKILL)
            throw ChildProcessError.timedOut(child.commandLine, timeout)
        }
        return child
    }

    /// Writes `lines` to a new file for an agent's stdin and returns its path.
    static func inputFile(_ lines: [String]) throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("tandem-stdin-\(UInt32.random(in: 0...UInt32.max)).txt").path
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

extension ChildProcess {
    /// The JSON objects printed so far (one per line with `--json`).
    var objects: [JSON] {
        standardOutput.split(separator: "\n").compactMap { try? JSON.parse(String($0)) }
    }

    /// The printed objects of one `type`.
    func objects(_ type: String) -> [JSON] {
        objects.filter { $0["type"]?.stringValue == type }
    }

    /// Waits until the output holds an object satisfying `predicate` (or the child
    /// ends); returns it.
    @discardableResult
    func waitForObject(timeout: Duration = .seconds(30), where predicate: (JSON) -> Bool) async throws -> JSON {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let hit = objects.first(where: predicate) { return hit }
            if !isRunning, let hit = objects.first(where: predicate) { return hit }
            if !isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw AgentOutputError("\(commandLine): nothing matching printed; stdout:\n\(standardOutput)\nstderr:\n\(standardError)")
    }

    /// Everything it printed, for a failure message.
    var transcript: String { "stdout:\n\(standardOutput)\nstderr:\n\(standardError)" }
}

struct AgentOutputError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
