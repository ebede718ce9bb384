import TandemCore

/// `tandem-agent room --room R`: a member of one room. The room comes from the client's
/// ``TandemClient/roomUpdates(_:)`` (the retained snapshot, changes in order, its own
/// edits at once, rollbacks); this prints it whenever what it shows changes, says each
/// rejection and each lock of ours that expired, and turns stdin lines into edits.
public actor RoomAgent {
    public let session: AgentSession
    public let roomId: String
    /// The room as last printed from (the client's replica as of the last update).
    private var replica: RoomReplica
    /// The sticker of each edit still waiting for its receipt (marked in the table).
    private var pendingStickers: [String: String] = [:]
    private var started = false
    /// Input lines that could not be understood (a typo in a script): the exit code says so.
    private var badLines = 0
    /// Requests that failed (a history query refused or unanswered, an undo without a
    /// receipt): like a rejection, exit code 1.
    private var failures = 0
    private var lastShown: (version: Int64, stickers: [Sticker], pending: Set<String>)?
    /// The last of our edits the update stream has shown, and who waits for one: a
    /// line is done once its edit is in ``replica`` (so `show`, and --json's snapshot
    /// of each edit, come in the order of the lines).
    private var lastLocalEdit: String?
    private var editWaiter: (eventId: String, continuation: CheckedContinuation<Void, Never>)?
    /// Who waits for the room to reach a version (an undo or redo's, so that the next
    /// line starts from the room as it left it).
    private var versionWaiter: (version: Int64, continuation: CheckedContinuation<Void, Never>)?
    private var console: Console { session.console }
    private var client: TandemClient { session.client }

    public static let retainedWait: Duration = .milliseconds(300)
    public static let settleTimeout: Duration = .seconds(30)
    /// How many changes `history` shows at a time.
    public static let historyPage = 20

    public init(session: AgentSession, roomId: String) {
        self.session = session
        self.roomId = roomId
        replica = RoomReplica(roomId: roomId)
    }

    public func run(input: AsyncStream<String>) async throws -> Int32 {
        let updates = try await client.roomUpdates(roomId)
        // A removed member hears nothing more of the room itself: its own room list says.
        let memberships = try await client.myRooms()
        return try await session.runInteractive(
            input: input, settle: Self.retainedWait,
            consumers: [{
                for await update in updates { await self.handle(update) }
                await self.updatesEnded()
            }, {
                for await list in memberships { await self.handle(memberships: list) }
            }],
            start: { await self.start() },
            line: { await self.handle(line: $0) },
            finish: { await self.finish() }
        )
    }

    private func finish() async -> Int32 {
        await session.finishScript(badLines: badLines, failures: failures, timeout: Self.settleTimeout)
    }

    private func start() {
        started = true
        show(force: true)
    }

    /// Prints the room when what is shown changed (or when asked).
    private func show(force: Bool = false) {
        guard started else { return }
        let stickers = replica.visibleStickers
        let pending = Set(pendingStickers.values)
        if !force, let last = lastShown, last.version == replica.version, last.stickers == stickers,
           console.json ? last.pending == pending : true { return }
        lastShown = (replica.version, stickers, pending)
        if console.json {
            console.object(.obj([
                "type": "snapshot",
                "roomId": .string(roomId),
                "epoch": JSON(replica.epoch),
                "version": .int(replica.version),
                "pending": .array(replica.pendingEventIds.map(JSON.string)),
                "stickers": .array(stickers.map { $0.json() }),
            ]))
        } else {
            console.line(RoomTable.render(roomId: roomId, version: replica.version, stickers: stickers, pendingStickers: pending))
        }
    }

    private func handle(line: String) async -> Bool {
        let parsed: RoomInput
        do throws(InputError) {
            parsed = try RoomInput.parse(line)
        } catch {
            badLines += 1
            console.error(error.message)
            return true
        }
        switch parsed {
        case .nothing: return true
        case .quit: return false
        case .help:
            console.line(RoomInput.helpText)
            return true
        case .show:
            show(force: true)
            return true
        case .members:
            let members = (await client.replica(of: roomId) ?? replica).members
            console.output(human: RoomTable.members(members),
                           json: .obj(["type": "members", "members": .array(members.map { $0.json() })]))
            return true
        case .history(let before):
            await showHistory(before: before)
            return true
        case .undo:
            await step(.undo)
            return true
        case .redo:
            await step(.redo)
            return true
        default:
            break
        }
        // Move and resize keep what is shown of the sticker, this agent's edits
        // included: the client's replica, which has every edit sent so far.
        let shown = await client.replica(of: roomId) ?? replica
        let eventId = await client.nextId()
        let event: EditEvent
        do throws(InputError) {
            guard let made = try parsed.event(eventId: eventId, timestamp: WallClock.now(), shown: shown.visibleSticker) else { return true }
            event = made
        } catch {
            badLines += 1
            console.error(error.message)
            return true
        }
        if event.type.namesSticker { pendingStickers[event.eventId] = event.stickerId }
        await client.post(event, in: roomId, label: Self.label(line: line, event: event))
        await untilShown(event.eventId)
        return true
    }

    /// Whether this user's room list held the room (nil: not heard yet).
    private var listed: Bool?

    private func handle(memberships list: [RoomMembership]) {
        let now = list.contains { $0.roomId == roomId }
        defer { listed = now }
        guard let was = listed, was, !now else { return }
        console.output(human: "you are no longer a member of room \(roomId)",
                       json: .obj(["type": "membership", "event": "removed", "roomId": .string(roomId), "role": .null]))
    }

    /// One line when this user was invited to, removed from or made owner of the room.
    private func announceMembership(before: RoomReplica, after: RoomReplica) {
        guard after.epoch != nil else { return }
        let me = session.user
        let was = before.members.first { $0.userId == me }?.role
        let now = after.members.first { $0.userId == me }?.role
        guard was != now, before.epoch != nil || now != nil else { return }
        let what: String
        switch (was, now) {
        case (nil, let role?) where role != .owner: what = "invited"
        case (_, .owner?) where was != nil: what = "owner"
        case (.some, nil): return  // said from the user's room list (handle(memberships:))
        case (_, let role?): what = role == .owner ? "owner" : "role"
        default: return
        }
        let human: String
        switch what {
        case "invited": human = "you were invited to room \(roomId) as \(now!.rawValue)"
        case "owner": human = "you are now the owner of room \(roomId)"
        case "removed": human = "you are no longer a member of room \(roomId)"
        default: human = "your role in room \(roomId) is now \(now!.rawValue)"
        }
        console.output(human: human, json: .obj([
            "type": .string("membership"), "event": .string(what), "roomId": .string(roomId), "role": JSON(now?.rawValue),
        ]))
    }

    /// Prints a page of the room's history (`history [BEFORE]`).
    private func showHistory(before: Int64?) async {
        do {
            // A script's edits before this line are in the history it reads.
            try await client.waitForReceipts(in: roomId)
            let answer = try await client.history(room: roomId, before: before, limit: Self.historyPage)
            console.output(
                human: RoomTable.history(answer, limit: Self.historyPage) { "history \($0)" },
                json: RoomTable.historyJSON(answer))
        } catch {
            failures += 1
            let code: String? = if case .queryRejected(let code, _)? = error as? TandemClientError { code } else { nil }
            console.error("history: \(error)", code: code)
        }
    }

    /// `undo` or `redo`. A rejection is said with the receipt (from the update stream), as
    /// every edit's; what was done, in one line for people.
    private func step(_ direction: UndoHistory.Direction) async {
        do {
            // The edits of the lines before are on the stacks once their receipts are in.
            try await client.waitForReceipts(in: roomId)
            let history = await client.undoHistory(of: roomId)
            let entry = direction == .undo ? history?.undoStack.last : history?.redoStack.last
            let receipt = try await direction == .undo ? client.undo(room: roomId) : client.redo(room: roomId)
            guard let receipt, let entry else {
                console.output(human: "nothing to \(direction.rawValue)",
                               json: .obj(["type": .string(direction.rawValue), "status": "nothing"]))
                return
            }
            guard receipt.status != .rejected else { return }
            // Done once the room shows it: the receipt can come before the change it
            // answers, and the next line's edit would be shown on the room before it.
            if let version = receipt.version { await untilVersion(version) }
            let done = direction == .undo ? "undone" : "redone"
            let was = history?.currentId(of: entry.sticker) ?? entry.sticker
            let now = await client.undoHistory(of: roomId)?.currentId(of: entry.sticker) ?? was
            console.line("\(done): \(entry.kind.rawValue) \(was)" + (now != was ? " (the sticker is back as \(now))" : ""))
        } catch {
            failures += 1
            console.error("\(direction.rawValue): \(error)")
        }
    }

    /// Returns once the update stream has brought our edit `eventId`.
    private func untilShown(_ eventId: String) async {
        guard lastLocalEdit != eventId else { return }
        await withCheckedContinuation { editWaiter = (eventId, $0) }
    }

    /// Returns once the update stream has brought the room to `version`.
    private func untilVersion(_ version: Int64) async {
        guard replica.version < version else { return }
        await withCheckedContinuation { versionWaiter = (version, $0) }
    }

    private func updatesEnded() {
        editWaiter?.continuation.resume()
        editWaiter = nil
        versionWaiter?.continuation.resume()
        versionWaiter = nil
    }

    private static func label(line: String, event: EditEvent) -> String {
        let verb = InputLine(line).verb ?? event.type.rawValue
        if event.type == .leave { return verb }
        if event.type == .restore { return "\(verb) \(event.restoreVersion ?? 0)" }
        return "\(verb) \(event.type.isMembership ? event.member ?? "" : event.stickerId)"
    }

    private func handle(_ update: RoomUpdate) {
        let before = replica
        replica = update.replica
        defer {
            if let waiter = versionWaiter, replica.version >= waiter.version {
                versionWaiter = nil
                waiter.continuation.resume()
            }
        }
        announceMembership(before: before, after: update.replica)
        // A lock of ours that expired under us (the lease ran out, or we were offline
        // past the grace period): the table alone would change without a word.
        for change in update.expiredLocks {
            console.output(
                human: "your lock on \(change.stickerId) expired (no edit within the lease, or offline past the grace period)",
                json: .obj(["type": "lockExpired", "stickerId": .string(change.stickerId), "version": .int(change.version)]))
        }
        switch update.cause {
        case .initial:
            break
        case .localEdit(let event, _):
            lastLocalEdit = event.eventId
            if let waiter = editWaiter, waiter.eventId == event.eventId {
                editWaiter = nil
                waiter.continuation.resume()
            }
            // A person sees the room once per change: when the coordinator's changes
            // come (or the rejection), not also for the optimistic local copy. --json
            // keeps every state, pending ones included.
            guard console.json else { return }
        case .receipt(let receipt, let outgoing):
            pendingStickers.removeValue(forKey: receipt.id)
            console.receipt(receipt, label: outgoing.label)
        case .changes(let changes, let applied):
            // Our edits the coordinator applied are no longer pending, receipt or not.
            for change in changes.changes where applied && change.userId == session.user {
                if let eventId = change.eventId { pendingStickers.removeValue(forKey: eventId) }
            }
        case .noLongerMember:
            // Said from the room list (handle(memberships:)).
            return
        case .snapshot(_, let newEpoch):
            // A new epoch throws away what was pending in the replica; the client still
            // resends until each gets its receipt.
            if newEpoch { pendingStickers.removeAll() }
        }
        show()
    }
}
