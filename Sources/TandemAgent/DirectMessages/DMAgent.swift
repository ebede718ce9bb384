import TandemCore

/// `tandem-agent dm`: shows every conversation of the user (the client's
/// ``TandemClient/conversations()``), then takes commands on stdin and prints what
/// arrives (new messages, status changes, read receipts, rejections).
public actor DMAgent {
    public let session: AgentSession
    private var book: ConversationBook
    /// Set once the retained snapshots are in and the list is printed; updates are
    /// printed from then on.
    private var started = false
    /// Input lines that could not be understood (a typo in a script): the exit code says so.
    private var badLines = 0
    private var console: Console { session.console }
    private var client: TandemClient { session.client }

    /// How long a finishing script waits for a gap to be filled (the client asks for the
    /// changes it missed: one round trip, unless the coordinator is away).
    public static let gapWait: Duration = .seconds(3)
    /// How long to wait after SUBACK for the retained snapshots.
    public static let retainedWait: Duration = .milliseconds(300)
    /// How long to wait for receipts once stdin is done.
    public static let settleTimeout: Duration = .seconds(30)

    public init(session: AgentSession) {
        self.session = session
        book = ConversationBook(user: session.user)
    }

    /// Runs until stdin ends (or `quit`) and every command has its receipt. Returns the
    /// exit code: 0, or 1 when a command was rejected or never answered.
    public func run(input: AsyncStream<String>) async throws -> Int32 {
        let views = try await client.conversations()
        let receipts = await client.receipts()
        return try await session.runInteractive(
            input: input, settle: Self.retainedWait,
            consumers: [
                { for await view in views { await self.handle(view) } },
                { for await event in receipts { await self.handle(event) } },
            ],
            start: { await self.start() },
            line: { await self.handle(line: $0) },
            finish: { await self.finish() }
        )
    }

    private func start() {
        started = true
        list()
    }

    private func list() {
        if console.json {
            for peer in book.peers { if let c = book.conversations[peer] { console.object(c.json.typed("conversation")) } }
        } else {
            console.line(book.listTable())
        }
    }

    /// Returns false on `quit`.
    private func handle(line: String) async -> Bool {
        let parsed: DMInput
        do throws(InputError) {
            parsed = try DMInput.parse(line)
        } catch {
            badLines += 1
            console.error(error.message)
            return true
        }
        switch parsed {
        case .nothing:
            break
        case .help:
            console.line(DMInput.helpText)
        case .quit:
            return false
        case .list:
            list()
        case .show(let peer):
            if console.json {
                if let c = book.conversations[peer] { console.object(c.json.typed("conversation")) } else { console.error("no conversation with \(peer)", code: "not_found") }
            } else {
                console.line(book.conversationText(peer: peer))
            }
        case .command(let kind, let peer, let text):
            let command = DMCommand(commandId: await client.nextId(), type: kind, peer: peer, timestamp: WallClock.now(), text: text)
            await client.post(command, label: kind == .message ? "send \(peer)" : "\(kind.rawValue) \(peer)")
        }
        return true
    }

    private func handle(_ event: ReceiptEvent) {
        guard case .settled(let outgoing, let receipt) = event, receipt.kind == .dm else { return }
        console.receipt(receipt, label: outgoing.label)
        // A read changes nothing the conversation view redraws when nothing was
        // unread: say it was done rather than print nothing.
        if receipt.isAcknowledgement, !console.json, outgoing.label.hasPrefix("read ") {
            console.line("\(outgoing.label): done")
        }
    }

    private func handle(_ view: ConversationReplica) {
        guard let snapshot = view.snapshot, let updates = book.update(with: snapshot), started else { return }
        if console.json {
            console.object(snapshot.json.typed("conversation"))
            for case .message(let peer, let m) in updates {
                console.object(.obj(["type": "message", "peer": .string(peer), "message": m.json]))
            }
        } else {
            for update in updates { console.line(book.describe(update)) }
        }
    }

    /// Stdin is done: waits for the receipts of what was sent, and for a conversation
    /// that fell behind to catch up, so that what arrived is printed; says goodbye.
    private func finish() async -> Int32 {
        await session.finishScript(badLines: badLines, timeout: Self.settleTimeout) { [client] in
            _ = await client.conversationsCaughtUp(timeout: Self.gapWait)
        }
    }
}
