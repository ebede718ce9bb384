import TandemCore
import TandemMQTT

/// `tandem-agent dm`: shows every conversation of the user from the retained snapshots,
/// then takes commands on stdin and prints what arrives (new messages, status changes,
/// read receipts, rejections).
public actor DMAgent {
    public let session: AgentSession
    private var book: ConversationBook
    private var ids: IdentifierGenerator
    /// Set once the retained snapshots are in and the list is printed; updates are
    /// printed from then on.
    private var started = false
    private var coordinator = CoordinatorWatch()
    /// Input lines that could not be understood (a typo in a script): the exit code says so.
    private var badLines = 0
    /// Conversations whose ConversationChanges left a gap, with the version the next
    /// snapshot must reach. Snapshots are paced to once a second, so a script that ends
    /// right after a gap waits (up to ``gapWait``) for the snapshot that fills it.
    private var behind: [String: Int64] = [:]
    /// How long a finishing script waits for the snapshot that fills a gap.
    public static let gapWait: Duration = .seconds(3)
    private var console: Console { session.console }

    /// How long to wait after SUBACK for the retained snapshots.
    public static let retainedWait: Duration = .milliseconds(300)
    /// How long to wait for receipts once stdin is done.
    public static let settleTimeout: Duration = .seconds(30)

    public init(session: AgentSession) {
        self.session = session
        book = ConversationBook(user: session.user)
        ids = IdentifierGenerator(user: session.user)
    }

    /// Runs until stdin ends (or `quit`) and every command has its receipt. Returns the
    /// exit code: 0, or 1 when a command was rejected or never answered.
    public func run(input: AsyncStream<String>) async throws -> Int32 {
        try await session.runInteractive(
            topics: [session.topics.conversations(user: session.user), session.topics.allConversationChanges(user: session.user),
                     session.topics.coordinatorStatus],
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
        if console.json {
            for peer in book.peers {
                if let c = book.conversations[peer] { console.object(c.json.typed("conversation")) }
            }
        } else {
            console.line(book.listTable())
        }
    }

    /// Returns false on `quit`.
    private func handle(line: String) async -> Bool {
        switch DMInput.parse(line) {
        case .failure(let error):
            badLines += 1
            console.error(error.message)
        case .success(.nothing):
            break
        case .success(.help):
            console.line(DMInput.helpText)
        case .success(.quit):
            return false
        case .success(.list):
            if console.json {
                for peer in book.peers { if let c = book.conversations[peer] { console.object(c.json.typed("conversation")) } }
            } else {
                console.line(book.listTable())
            }
        case .success(.show(let peer)):
            if console.json {
                if let c = book.conversations[peer] { console.object(c.json.typed("conversation")) } else { console.error("no conversation with \(peer)", code: "not_found") }
            } else {
                console.line(book.conversationText(peer: peer))
            }
        case .success(.command(let kind, let peer, let text)):
            let command = DMCommand(commandId: ids.next(), type: kind, peer: peer, timestamp: WallClock.now(), text: text)
            let label = kind == .message ? "send \(peer)" : "\(kind.rawValue) \(peer)"
            await session.sender.send(Outgoing(
                id: command.commandId, topic: session.topics.dmCommands(user: session.user),
                payload: command.json.serialized(), label: label))
        }
        return true
    }

    private func handle(_ receipt: Receipt) async {
        guard receipt.kind == .dm else { return }
        let settlement = await session.sender.receipt(receipt)
        switch settlement {
        case .unknown:
            return
        case .acknowledged(let outgoing):
            console.object(receipt.json.typed("receipt"))
            // A read changes nothing the conversation view redraws when nothing was
            // unread: say it was done rather than print nothing.
            if !console.json, outgoing.label.hasPrefix("read ") {
                console.line("\(outgoing.label): done")
            }
        case .rejected(let outgoing):
            console.output(
                human: "rejected: \(outgoing.label): \(receipt.code?.rawValue ?? "error"): \(receipt.message)",
                json: receipt.json.typed("receipt"))
        }
    }

    private func handle(_ message: MQTTMessage) {
        if message.topic == session.topics.coordinatorStatus {
            if let news = coordinator.note(message.payload) { console.output(human: news.human, json: news.json) }
            return
        }
        let updates: [ConversationBook.Update]?
        let peer: String
        if message.topic.hasSuffix("/changes") {
            let changes: ConversationChanges
            do {
                changes = try ConversationChanges.decode(message.payload)
            } catch {
                session.logger.warning("unreadable conversation changes on \(message.topic): \(error)")
                return
            }
            peer = changes.peer
            updates = book.take(changes, now: WallClock.now())
            if updates == nil, let held = book.replicas[peer]?.version, held < changes.fromVersion {
                behind[peer] = max(behind[peer] ?? 0, changes.toVersion)
            }
        } else {
            let snapshot: ConversationSnapshot
            do {
                snapshot = try ConversationSnapshot.decode(message.payload)
            } catch {
                session.logger.warning("unreadable conversation snapshot on \(message.topic): \(error)")
                return
            }
            peer = snapshot.peer
            updates = book.take(snapshot)
            if let target = behind[peer], (book.replicas[peer]?.version ?? 0) >= target { behind[peer] = nil }
        }
        guard let updates, started, let view = book.conversations[peer] else { return }
        if console.json {
            console.object(view.json.typed("conversation"))
            for case .message(let peer, let m) in updates {
                console.object(.obj(["type": "message", "peer": .string(peer), "message": m.json]))
            }
        } else {
            for update in updates { console.line(book.describe(update)) }
        }
    }

    /// Stdin is done: waits for the receipts of what was sent, says goodbye.
    private func finish() async -> Int32 {
        let abandoned = await session.sender.settle(timeout: Self.settleTimeout)
        for outgoing in abandoned {
            console.error("no receipt for \(outgoing.label) (\(outgoing.id)) after \(Self.settleTimeout.components.seconds) s", code: "timeout")
        }
        let deadline = ContinuousClock.now + Self.gapWait
        while !behind.isEmpty, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        let rejected = await session.sender.rejectedCount
        await session.close()
        return AgentExit.code(badLines: badLines, rejected: rejected, abandoned: abandoned.count)
    }
}
