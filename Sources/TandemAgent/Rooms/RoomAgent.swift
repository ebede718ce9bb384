import TandemCore
import TandemMQTT

/// `tandem-agent room --room R`: a member of one room. Shows the room from its retained
/// snapshot and changes, shows its own edits at once (``RoomReplica``) and keeps them
/// pending until their receipts, and prints the room whenever what it shows changes.
public actor RoomAgent {
    public let session: AgentSession
    public let roomId: String
    private var replica: RoomReplica
    private var ids: IdentifierGenerator
    /// The sticker of each edit still waiting for its receipt (marked in the table).
    private var pendingStickers: [String: String] = [:]
    private var started = false
    /// Input lines that could not be understood (a typo in a script): the exit code says so.
    private var badLines = 0
    private var lastShown: (version: Int64, stickers: [Sticker], pending: Set<String>)?
    private var coordinator = CoordinatorWatch()
    private var console: Console { session.console }

    public static let retainedWait: Duration = .milliseconds(300)
    public static let settleTimeout: Duration = .seconds(30)

    public init(session: AgentSession, roomId: String) {
        self.session = session
        self.roomId = roomId
        replica = RoomReplica(roomId: roomId)
        ids = IdentifierGenerator(user: session.user)
    }

    public func run(input: AsyncStream<String>) async throws -> Int32 {
        try await session.runInteractive(
            topics: [session.topics.roomState(room: roomId), session.topics.roomChanges(room: roomId), session.topics.coordinatorStatus],
            input: input, settle: Self.retainedWait,
            receipt: { await self.handle($0) },
            message: { await self.handle($0) },
            start: { await self.start() },
            line: { await self.handle(line: $0) },
            finish: { await self.finish() }
        )
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
        switch RoomInput.parse(line) {
        case .failure(let error):
            badLines += 1
            console.error(error.message)
            return true
        case .success(let input):
            parsed = input
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
        default:
            break
        }
        let event: EditEvent
        do throws(InputError) {
            guard let made = try parsed.event(eventId: ids.next(), timestamp: WallClock.now(), shown: replica.visibleSticker) else { return true }
            event = made
        } catch {
            badLines += 1
            console.error(error.message)
            return true
        }
        if let predicted = replica.applyLocal(event, as: session.user) {
            session.logger.info("\(event.type.rawValue) \(event.stickerId) will likely be rejected: \(predicted)")
        }
        pendingStickers[event.eventId] = event.stickerId
        let label = Self.label(line: line, event: event)
        await session.sender.send(Outgoing(
            id: event.eventId, topic: session.topics.roomEvents(room: roomId, user: session.user),
            payload: event.json().serialized(), label: label))
        // A person sees the room once per change: when the coordinator's changes come
        // (or the rejection), not also for the optimistic local copy. --json keeps
        // every state, pending ones included.
        if console.json { show() }
        return true
    }

    private static func label(line: String, event: EditEvent) -> String {
        let verb = InputLine(line).verb ?? event.type.rawValue
        return "\(verb) \(event.stickerId)"
    }

    private func handle(_ receipt: Receipt) async {
        guard receipt.kind == .room else { return }
        let settlement = await session.sender.receipt(receipt)
        guard case .unknown = settlement else {
            replica.receipt(receipt)
            pendingStickers.removeValue(forKey: receipt.id)
            if case .rejected(let outgoing) = settlement {
                console.output(
                    human: "rejected: \(outgoing.label): \(receipt.code?.rawValue ?? "error"): \(receipt.message)",
                    json: receipt.json.typed("receipt"))
            } else {
                console.object(receipt.json.typed("receipt"))
            }
            show()
            return
        }
    }

    private func handle(_ message: MQTTMessage) {
        if message.topic == session.topics.coordinatorStatus {
            if let news = coordinator.note(message.payload) { console.output(human: news.human, json: news.json) }
            return
        }
        if message.topic.hasSuffix("/changes") {
            guard let changes = try? RoomChanges.decode(message.payload) else {
                session.logger.warning("unreadable room changes on \(message.topic)")
                return
            }
            sayLostLocks(changes)
            if replica.changes(changes) {
                // Our edits the coordinator applied are no longer pending, receipt or not.
                for change in changes.changes where change.userId == session.user {
                    if let eventId = change.eventId { pendingStickers.removeValue(forKey: eventId) }
                }
            }
        } else {
            let snapshot: RoomSnapshot
            do {
                snapshot = try RoomSnapshot.decode(message.payload)
            } catch {
                session.logger.warning("unreadable room snapshot on \(message.topic): \(error)")
                return
            }
            let epochBefore = replica.epoch
            replica.snapshot(snapshot)
            if let epochBefore, epochBefore != snapshot.epoch {
                // A new epoch throws away what was pending in the replica; the sender
                // still resends until each gets its receipt.
                pendingStickers.removeAll()
            }
        }
        show()
    }

    /// One line when a lock of ours expires under us (the lease ran out, or we were
    /// offline past the grace period): the table alone would change without a word.
    private func sayLostLocks(_ changes: RoomChanges) {
        for change in changes.changes where change.type == .expire {
            guard replica.confirmedStickers.first(where: { $0.id == change.stickerId })?.owner == session.user else { continue }
            console.output(
                human: "your lock on \(change.stickerId) expired (no edit within the lease, or offline past the grace period)",
                json: .obj(["type": "lockExpired", "stickerId": .string(change.stickerId), "version": .int(change.version)]))
        }
    }

    private func finish() async -> Int32 {
        let abandoned = await session.sender.settle(timeout: Self.settleTimeout)
        for outgoing in abandoned {
            console.error("no receipt for \(outgoing.label) (\(outgoing.id)) after \(Self.settleTimeout.components.seconds) s", code: "timeout")
        }
        let rejected = await session.sender.rejectedCount
        await session.close()
        return AgentExit.code(badLines: badLines, rejected: rejected, abandoned: abandoned.count)
    }
}
