import TandemCore

/// One line of `tandem-agent room`'s stdin.
public enum RoomInput: Sendable, Equatable {
    case create(id: String, image: String, frame: Frame)
    case move(id: String, x: Double, y: Double)
    case resize(id: String, width: Double, height: Double)
    case acquire(id: String)
    case release(id: String)
    case delete(id: String)
    case invite(member: String, role: MemberRole)
    case remove(member: String)
    case role(member: String, role: MemberRole)
    case leave
    /// A page of the room's changes, newest first; `before`: only versions below it.
    case history(before: Int64?)
    /// The room back as it was right after `version`.
    case restore(version: Int64)
    /// Take back this user's last create, move, resize or delete (``TandemClient/undo(room:timestamp:)``).
    case undo
    /// Apply again what the last undo took back.
    case redo
    case members
    case show
    case help
    case quit
    /// An empty line or a `#` comment.
    case nothing

    public static let helpText = """
        create ID IMAGE X Y W H   a new sticker (you hold it)
        move ID X Y               move a sticker (keeps its size)
        resize ID W H             resize a sticker (keeps its position)
        acquire ID                take a sticker's lock
        release ID                give the lock back
        delete ID                 remove a sticker for good
        invite USER [viewer]      make USER a member (an editor unless viewer; the owner only)
        remove USER               take USER out of the room (the owner only)
        role USER editor|viewer   change a member's role (the owner only)
        leave                     leave the room (an owner passes it on)
        history [BEFORE]          the room's changes, newest first (those below version BEFORE)
        restore VERSION           the room's stickers back as they were right after VERSION
        undo                      take back your last create, move, resize or delete
        redo                      apply again what undo took back
        members                   who belongs to the room
        show                      the room as a table
        help                      this text
        quit                      finish (waits for receipts) and exit
        """

    /// One line typed or piped to the agent; throws what is wrong with it.
    public static func parse(_ line: String) throws(InputError) -> RoomInput {
        let input = InputLine(line)
        guard let verb = input.verb else { return .nothing }
        func idOnly(_ usage: String) throws(InputError) -> String {
            try input.expectCount(2, usage: usage)
            return try input.identifier(at: 1, "ID", usage: usage)
        }
        switch verb {
        case "create":
            let usage = "create ID IMAGE X Y W H"
            try input.expectCount(7, usage: usage)
            let id = try input.identifier(at: 1, "ID", usage: usage)
            let image = String(input.words[2])
            guard image.count <= WireLimits.maxImageLength else {
                throw InputError("IMAGE is \(image.count) characters; the limit is \(WireLimits.maxImageLength)")
            }
            let frame = Frame(
                x: try input.number(at: 3, "X", usage: usage), y: try input.number(at: 4, "Y", usage: usage),
                width: try input.number(at: 5, "W", usage: usage, positive: true),
                height: try input.number(at: 6, "H", usage: usage, positive: true))
            return .create(id: id, image: image, frame: frame)
        case "move":
            let usage = "move ID X Y"
            try input.expectCount(4, usage: usage)
            return .move(id: try input.identifier(at: 1, "ID", usage: usage),
                         x: try input.number(at: 2, "X", usage: usage), y: try input.number(at: 3, "Y", usage: usage))
        case "resize":
            let usage = "resize ID W H"
            try input.expectCount(4, usage: usage)
            return .resize(id: try input.identifier(at: 1, "ID", usage: usage),
                           width: try input.number(at: 2, "W", usage: usage, positive: true),
                           height: try input.number(at: 3, "H", usage: usage, positive: true))
        case "acquire": return .acquire(id: try idOnly("acquire ID"))
        case "release": return .release(id: try idOnly("release ID"))
        case "delete": return .delete(id: try idOnly("delete ID"))
        case "invite":
            let usage = "invite USER [editor|viewer]"
            guard input.words.count == 2 || input.words.count == 3 else { throw InputError("usage: \(usage)") }
            let member = try input.identifier(at: 1, "USER", usage: usage)
            let role = input.words.count == 3 ? try Self.role(String(input.words[2]), usage: usage) : .editor
            return .invite(member: member, role: role)
        case "remove":
            try input.expectCount(2, usage: "remove USER")
            return .remove(member: try input.identifier(at: 1, "USER", usage: "remove USER"))
        case "role":
            let usage = "role USER editor|viewer"
            try input.expectCount(3, usage: usage)
            return .role(member: try input.identifier(at: 1, "USER", usage: usage), role: try Self.role(String(input.words[2]), usage: usage))
        case "leave":
            try input.expectCount(1, usage: "leave")
            return .leave
        case "history":
            let usage = "history [BEFORE]"
            guard input.words.count <= 2 else { throw InputError("too many arguments; usage: \(usage)") }
            return .history(before: input.words.count == 2 ? try Self.version(String(input.words[1]), "BEFORE", usage: usage) : nil)
        case "restore":
            let usage = "restore VERSION"
            try input.expectCount(2, usage: usage)
            return .restore(version: try Self.version(String(input.words[1]), "VERSION", usage: usage))
        case "undo":
            try input.expectCount(1, usage: "undo")
            return .undo
        case "redo":
            try input.expectCount(1, usage: "redo")
            return .redo
        case "members":
            try input.expectCount(1, usage: "members")
            return .members
        case "show":
            try input.expectCount(1, usage: "show")
            return .show
        case "help", "?": return .help
        case "quit", "exit": return .quit
        default:
            throw InputError("unknown command \"\(verb)\"; type help for the commands")
        }
    }

    /// A room version: a whole number from 1.
    static func version(_ word: String, _ name: String, usage: String) throws(InputError) -> Int64 {
        guard let version = Int64(word), version >= 1 else {
            throw InputError("\(name) must be a version, a whole number from 1, not \"\(word)\" (usage: \(usage))")
        }
        return version
    }

    static func role(_ word: String, usage: String) throws(InputError) -> MemberRole {
        guard let role = MemberRole(rawValue: word), MemberRole.grantable.contains(role) else {
            throw InputError("ROLE must be editor or viewer, not \"\(word)\" (usage: \(usage))")
        }
        return role
    }

    /// The edit event this line makes, given the sticker as shown (move and resize
    /// send `update` with the whole frame). Throws when a move or resize names a
    /// sticker that is not shown.
    public func event(eventId: String, timestamp: Millis, shown: (String) -> Sticker?) throws(InputError) -> EditEvent? {
        switch self {
        case .create(let id, let image, let frame):
            return EditEvent(eventId: eventId, type: .create, stickerId: id, timestamp: timestamp, image: image, frame: frame)
        case .move(let id, let x, let y):
            guard let sticker = shown(id) else { throw InputError("no sticker \(id) in the room") }
            let frame = Frame(x: x, y: y, width: sticker.frame.width, height: sticker.frame.height)
            return EditEvent(eventId: eventId, type: .update, stickerId: id, timestamp: timestamp, frame: frame)
        case .resize(let id, let width, let height):
            guard let sticker = shown(id) else { throw InputError("no sticker \(id) in the room") }
            let frame = Frame(x: sticker.frame.x, y: sticker.frame.y, width: width, height: height)
            return EditEvent(eventId: eventId, type: .update, stickerId: id, timestamp: timestamp, frame: frame)
        case .acquire(let id): return EditEvent(eventId: eventId, type: .acquire, stickerId: id, timestamp: timestamp)
        case .release(let id): return EditEvent(eventId: eventId, type: .release, stickerId: id, timestamp: timestamp)
        case .delete(let id): return EditEvent(eventId: eventId, type: .delete, stickerId: id, timestamp: timestamp)
        case .invite(let member, let role): return EditEvent(eventId: eventId, type: .invite, member: member, role: role, timestamp: timestamp)
        case .remove(let member): return EditEvent(eventId: eventId, type: .remove, member: member, timestamp: timestamp)
        case .role(let member, let role): return EditEvent(eventId: eventId, type: .role, member: member, role: role, timestamp: timestamp)
        case .leave: return EditEvent(eventId: eventId, type: .leave, member: nil, timestamp: timestamp)
        case .restore(let version): return EditEvent(eventId: eventId, restoringTo: version, timestamp: timestamp)
        case .history, .undo, .redo, .show, .members, .help, .quit, .nothing: return nil
        }
    }
}

/// The room as a table for people.
public enum RoomTable {
    /// `members: alice (owner), bob (editor), carol (viewer)`.
    public static func members(_ members: [RoomMember]) -> String {
        members.isEmpty ? "members: (none known yet)" : "members: " + members.map { "\($0.userId) (\($0.role.rawValue))" }.joined(separator: ", ")
    }

    /// A page of the room's history, newest first, and how to ask for the page before it
    /// when this one is full (`limit` entries) and older versions exist. `older` is the
    /// command that asks ("history 12", or the one-shot command's line).
    public static func history(_ answer: RoomHistoryAnswer, limit: Int, older: (Int64) -> String) -> String {
        var lines = ["room \(answer.roomId) · version \(answer.version) · restorable back to version \(answer.oldest)"]
        if answer.entries.isEmpty {
            lines.append("(no changes)")
            return lines.joined(separator: "\n")
        }
        var table = TextTable(headers: ["VERSION", "CHANGE", "STICKER", "BY", "TIME"])
        for entry in answer.entries {
            table.rows.append([
                String(entry.version), entry.type.rawValue, entry.stickerId ?? "-", entry.userId ?? "-", Format.time(entry.timestamp),
            ])
        }
        lines.append(table.rendered())
        if answer.entries.count >= limit, let last = answer.entries.last, last.version > 1 {
            lines.append("… older changes: \(older(last.version))")
        }
        return lines.joined(separator: "\n")
    }

    /// The `--json` line of a history page: `{"type":"history","roomId","epoch","version",
    /// "oldest","entries":[...]}`, the entries as the coordinator wrote them.
    public static func historyJSON(_ answer: RoomHistoryAnswer) -> JSON {
        .object([
            .init("type", "history"),
            .init("roomId", .string(answer.roomId)),
            .init("epoch", .string(answer.epoch)),
            .init("version", .int(answer.version)),
            .init("oldest", .int(answer.oldest)),
            .init("entries", .array(answer.entries.map(\.json))),
        ])
    }

    public static func render(roomId: String, version: Int64, stickers: [Sticker], pendingStickers: Set<String>) -> String {
        var lines = ["room \(roomId) · version \(version) · \(stickers.count) sticker\(stickers.count == 1 ? "" : "s")"
            + (pendingStickers.isEmpty ? "" : " · \(pendingStickers.count) pending")]
        if stickers.isEmpty {
            lines.append("(no stickers)")
        } else {
            var table = TextTable(headers: ["ID", "IMAGE", "X", "Y", "W", "H", "OWNER", "UPDATED BY", ""])
            for s in stickers {
                table.rows.append([
                    s.id, s.image, Format.number(s.frame.x), Format.number(s.frame.y),
                    Format.number(s.frame.width), Format.number(s.frame.height),
                    s.owner ?? "-", s.updatedBy, pendingStickers.contains(s.id) ? "(pending)" : "",
                ])
            }
            lines.append(table.rendered())
        }
        return lines.joined(separator: "\n")
    }
}
