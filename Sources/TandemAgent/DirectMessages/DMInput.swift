import TandemCore

/// One line of `tandem-agent dm`'s stdin.
public enum DMInput: Sendable, Equatable {
    /// A command for the coordinator.
    case command(DMCommand.Kind, peer: String, text: String?)
    case list
    case show(peer: String)
    case help
    case quit
    /// An empty line or a `#` comment.
    case nothing

    public static let helpText = """
        request PEER [TEXT]   ask PEER to talk, TEXT the first message
        accept PEER           accept PEER's request
        decline PEER          decline PEER's request
        send PEER TEXT        send a message in an active conversation
        read PEER             mark PEER's messages read
        leave PEER            leave the conversation
        list                  every conversation
        show PEER             the messages of one conversation
        help                  this text
        quit                  finish (waits for receipts) and exit
        """

    /// One line typed or piped to the agent; throws what is wrong with it.
    public static func parse(_ line: String) throws(InputError) -> DMInput {
        let input = InputLine(line)
        guard let verb = input.verb else { return .nothing }
        func peerOnly(_ kind: DMCommand.Kind, _ usage: String) throws(InputError) -> DMInput {
            try input.expectCount(2, usage: usage)
            return .command(kind, peer: try input.identifier(at: 1, "PEER", usage: usage), text: nil)
        }
        switch verb {
        case "request":
            let usage = "request PEER [TEXT]"
            let peer = try input.identifier(at: 1, "PEER", usage: usage)
            return .command(.request, peer: peer, text: try checked(input.rest(after: 2)))
        case "send", "message", "msg":
            let usage = "send PEER TEXT"
            let peer = try input.identifier(at: 1, "PEER", usage: usage)
            guard let text = input.rest(after: 2) else { throw InputError("missing TEXT; usage: \(usage)") }
            return .command(.message, peer: peer, text: try checked(text))
        case "accept": return try peerOnly(.accept, "accept PEER")
        case "decline": return try peerOnly(.decline, "decline PEER")
        case "read": return try peerOnly(.read, "read PEER")
        case "leave": return try peerOnly(.leave, "leave PEER")
        case "list", "ls":
            try input.expectCount(1, usage: "list")
            return .list
        case "show":
            try input.expectCount(2, usage: "show PEER")
            return .show(peer: try input.identifier(at: 1, "PEER", usage: "show PEER"))
        case "help", "?": return .help
        case "quit", "exit": return .quit
        default:
            throw InputError("unknown command \"\(verb)\"; type help for the commands")
        }
    }

    private static func checked(_ text: String?) throws(InputError) -> String? {
        guard let text else { return nil }
        let size = text.utf8.count
        if size > WireLimits.maxDMTextBytes {
            throw InputError("TEXT is \(size) bytes; the limit is \(WireLimits.maxDMTextBytes)")
        }
        return text
    }
}
