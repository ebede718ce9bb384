import TandemClient
import TandemCore

/// The frames the server sends the page, built from the client library's values. Every
/// one is a JSON object with a `type` (docs/PROTOCOL.md, "The browser front end").
enum PageJSON {
    static func hello(user: String) -> JSON {
        .obj(["type": "hello", "user": .string(user)])
    }

    static func error(_ problem: PageFrame.Problem) -> JSON {
        .obj(["type": "error", "code": .string(problem.code.rawValue), "message": .string(problem.message), "ref": JSON(problem.ref)])
    }

    static func rooms(_ memberships: [RoomMembership]) -> JSON {
        .obj(["type": "rooms", "rooms": .array(memberships.map { entry in
            .obj(["roomId": .string(entry.roomId), "role": .string(entry.role.rawValue), "owner": JSON(entry.owner)])
        })])
    }

    static func presence(_ online: Set<String>) -> JSON {
        .obj(["type": "presence", "online": .array(online.sorted().map(JSON.string))])
    }

    /// The room as this user's client shows it: confirmed state with this user's own
    /// pending edits laid over (`known`: false before any snapshot came: a room that
    /// does not exist yet, or one this user may not read), and whether this person has
    /// anything to undo or redo there (`undo`: their stacks in the room, as the session's
    /// client holds them). ``RoomFrames`` writes the same bytes, the room's part shared.
    static func room(_ replica: RoomReplica, undo: UndoHistory?) -> JSON {
        guard case .object(var members) = roomBody(replica) else { return roomBody(replica) }
        members.append(JSON.Member("canUndo", .bool(undo?.canUndo ?? false)))
        members.append(JSON.Member("canRedo", .bool(undo?.canRedo ?? false)))
        return .object(members)
    }

    /// The part of a `room` frame that is the room's (all but `canUndo` and `canRedo`,
    /// which are the person's): the same for every page that shows the room at a version
    /// without edits of its own pending. Its last member is `stickers`, each a
    /// ``ShownSticker`` (``RoomFrames`` writes them from the text it keeps of each).
    static func roomBody(_ replica: RoomReplica) -> JSON {
        .object(roomHead(replica) + [JSON.Member("stickers", .array(replica.visibleStickers.map { ShownSticker($0).json }))])
    }

    /// ``roomBody(_:)``'s members before `stickers`.
    static func roomHead(_ replica: RoomReplica) -> [JSON.Member] {
        [
            JSON.Member("type", "room"),
            JSON.Member("room", .string(replica.roomId)),
            JSON.Member("known", .bool(replica.epoch != nil)),
            JSON.Member("version", .int(replica.version)),
            JSON.Member("owner", JSON(replica.owner)),
            JSON.Member("members", .array(replica.members.map { .obj(["userId": .string($0.userId), "role": .string($0.role.rawValue)]) })),
        ]
    }

    /// What of a sticker a `room` frame shows, and nothing else: two that are equal are
    /// written as the same bytes (``RoomFrames`` keeps a sticker's text by it).
    struct ShownSticker: Equatable, Sendable {
        var id: String
        var image: String
        var frame: Frame
        var owner: String?

        init(_ sticker: Sticker) {
            id = sticker.id
            image = sticker.image
            frame = sticker.frame
            owner = sticker.owner
        }

        var json: JSON {
            .obj(["id": .string(id), "image": .string(image), "frame": frame.json(), "owner": JSON(owner)])
        }

        /// Byte for byte: String's `==` takes two spellings of the same character as
        /// equal, and they are written differently (the image name is free text; ids are
        /// ASCII).
        static func == (a: ShownSticker, b: ShownSticker) -> Bool {
            a.frame == b.frame && a.id == b.id && a.owner == b.owner && a.image.utf8.elementsEqual(b.image.utf8)
        }
    }

    /// What became of an `undo` or `redo` frame: `status` is the receipt's (`accepted`,
    /// `rejected` with its code, `duplicate`), or `nothing` when there was nothing to
    /// undo or redo; `sticker` and `holder` name the sticker the step was about and who
    /// holds it, when it was refused `owned_by_other`.
    static func undoResult(
        ref: String, room: String, direction: UndoHistory.Direction, receipt: Receipt?, sticker: String? = nil, holder: String? = nil
    ) -> JSON {
        .obj([
            "type": "undoResult", "ref": .string(ref), "room": .string(room), "op": .string(direction.rawValue),
            "status": .string(receipt?.status.rawValue ?? "nothing"),
            "code": JSON(receipt?.code?.rawValue),
            "message": .string(receipt?.message ?? "nothing to \(direction.rawValue)"),
            "sticker": JSON(sticker), "holder": JSON(holder),
        ])
    }

    /// A page of a room's history (newest first), answering a `roomHistory` frame;
    /// `hasMore` says whether older entries may exist.
    static func roomHistory(_ answer: RoomHistoryAnswer, before: Int64?, limit: Int) -> JSON {
        .obj([
            "type": "roomHistory", "room": .string(answer.roomId), "before": JSON(before),
            "version": .int(answer.version), "oldest": .int(answer.oldest),
            "entries": .array(answer.entries.map { entry in
                .obj([
                    "version": .int(entry.version), "userId": JSON(entry.userId), "type": .string(entry.type.rawValue),
                    "stickerId": JSON(entry.stickerId), "timestamp": .int(entry.timestamp),
                ])
            }),
            "hasMore": .bool(answer.entries.count >= limit && (answer.entries.last?.version ?? 0) > 1),
        ])
    }

    /// A `roomHistory` frame that could not be answered: the coordinator's error code
    /// (`not_member`, `rate_limited`, ...) or `unavailable`.
    static func roomHistoryError(room: String, before: Int64?, code: String, message: String) -> JSON {
        .obj([
            "type": "roomHistory", "room": .string(room), "before": JSON(before),
            "error": .obj(["code": .string(code), "message": .string(message)]),
        ])
    }

    /// Another member's pointer over the watched room's photo (`x` and `y` null: it left).
    static func cursor(room: String, _ cursor: RoomCursor) -> JSON {
        .obj([
            "type": "cursor", "room": .string(room), "user": .string(cursor.userId),
            "x": cursor.position.map { .double($0.x) } ?? .null, "y": cursor.position.map { .double($0.y) } ?? .null,
        ])
    }

    static func roomClosed(_ room: String) -> JSON {
        .obj(["type": "roomClosed", "room": .string(room), "message": "you are no longer a member of this room"])
    }

    static func receipt(ref: String, _ receipt: Receipt) -> JSON {
        .obj([
            "type": "receipt", "ref": .string(ref), "status": .string(receipt.status.rawValue),
            "code": JSON(receipt.code?.rawValue), "message": .string(receipt.message),
        ])
    }

    /// How many of a conversation's latest messages a `conversations` frame carries; the
    /// page asks for older ones with `history` frames when it scrolls up.
    static let recentMessages = 50

    static func conversations(_ replicas: [ConversationReplica]) -> JSON {
        .obj(["type": "conversations", "conversations": .array(replicas.map { replica in
            .obj([
                "peer": .string(replica.peer),
                "status": JSON(replica.status?.rawValue),
                "unread": .int(Int64(replica.unread)),
                "updatedAt": .int(replica.updatedAt),
                "messages": .array(replica.messages.suffix(recentMessages).map(\.json)),
                "hasOlder": .bool(replica.messages.count > recentMessages || replica.messages.count >= Conversation.snapshotSize),
            ])
        })])
    }

    /// A page of older messages (oldest first), answering a `history` frame.
    static func history(_ page: DMHistoryPage, before: Millis?) -> JSON {
        .obj([
            "type": "history", "peer": .string(page.peer), "before": JSON(before),
            "messages": .array(page.messages.map(\.json)), "hasMore": .bool(page.hasMore),
        ])
    }

    /// One workout's card: its latest snapshot as the contract writes it, and the heart
    /// rates of the snapshots seen (`[timestamp, bpm]`, oldest first) for the line.
    static func workout(_ snapshot: WorkoutSnapshot, heartRates: [(Millis, Double)]) -> JSON {
        .obj([
            "type": "workout", "workout": snapshot.json,
            "heartRates": .array(heartRates.map { .array([.int($0.0), .double($0.1)]) }),
        ])
    }

    static let pong = JSON.obj(["type": "pong"])
    static let signedOut = JSON.obj(["type": "signedOut"])
}
