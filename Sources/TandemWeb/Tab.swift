import HummingbirdWebSocket
import Logging
import NIOCore
import TandemClient

/// One browser tab's WebSocket: reads the page's frames (validated, paced by the
/// session), carries them out through the session's ``TandemClient``, and sends the
/// page what it shows (the room it watches, receipts of its own edits and commands,
/// and what the session shares with every tab).
actor Tab {
    let session: WebSession
    let id: Int
    private let continuation: AsyncStream<OutFrame>.Continuation
    private let metrics: WebMetrics
    private let logger: Logger
    /// The page's `ref` of each event or command this tab sent, by its id.
    private var refs: [String: String] = [:]
    private var watchedRoom: String?
    /// The watched room's latest state not yet written, and when the oldest change it
    /// holds was taken from the client (one ``OutFrame/latestRoom`` is queued for it).
    private var pendingRoom: (replica: RoomReplica, takenAt: ContinuousClock.Instant)?
    private var roomTask: Task<Void, Never>?
    private var receiptTask: Task<Void, Never>?

    init(session: WebSession, id: Int, continuation: AsyncStream<OutFrame>.Continuation, metrics: WebMetrics, logger: Logger) {
        self.session = session
        self.id = id
        self.continuation = continuation
        self.metrics = metrics
        self.logger = logger
    }

    /// Runs the tab until the page goes away or the session ends.
    static func run(
        session: WebSession, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, metrics: WebMetrics, logger: Logger
    ) async throws {
        guard let attached = await session.attach() else {
            try await outbound.write(.text(PageJSON.signedOut.text))
            return
        }
        let (id, frames, continuation) = attached
        let tab = Tab(session: session, id: id, continuation: continuation, metrics: metrics, logger: logger)
        metrics.tabs.increment()
        defer { metrics.tabs.decrement() }
        await tab.followReceipts()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Ends when the session ends (its last frame says signedOut): then
                    // the socket is closed, which ends the reading too.
                    for await frame in frames {
                        if let json = frame.json {
                            try await outbound.write(.text(json.text))
                        } else if let (json, takenAt) = await tab.takeRoom() {
                            try await outbound.write(.text(json.text))
                            metrics.updateToFrame.record(ContinuousClock.now - takenAt)
                        } else {
                            continue
                        }
                        metrics.sent.increment()
                    }
                    try? await outbound.close(.normalClosure, reason: "signed out")
                }
                group.addTask {
                    try await tab.read(inbound)
                }
                _ = try await group.next()
                group.cancelAll()
            }
        } catch {
            await tab.stop()
            await session.detach(id)
            throw error
        }
        await tab.stop()
        await session.detach(id)
    }

    /// Reads whole messages (continuation frames joined, at most ``PageFrame/maxBytes``
    /// kept of one) and hands each to ``handle(_:)``.
    private nonisolated func read(_ inbound: WebSocketInboundStream) async throws {
        var message: [UInt8] = []
        var size = 0
        var binary = false
        for try await frame in inbound {
            if frame.opcode != .continuation {
                message.removeAll(keepingCapacity: true)
                size = 0
                binary = frame.opcode == .binary
            }
            size += frame.data.readableBytes
            if size <= PageFrame.maxBytes {
                message.append(contentsOf: frame.data.readableBytesView)
            }
            guard frame.fin else { continue }
            // Every message waits its turn, a bad one too: flooding is slowed either way.
            let wait = await session.reserveFrame()
            if wait > 0 {
                metrics.paced.increment()
                try await Task.sleep(for: .milliseconds(wait))
            }
            if binary {
                await refuse(PageFrame.Problem(.binaryFrame, "frames are JSON text, not binary"))
            } else if size > PageFrame.maxBytes {
                await refuse(PageFrame.Problem(.frameTooLarge, "the frame is \(size) bytes; the limit is \(PageFrame.maxBytes)"))
            } else {
                await handle(message, readAt: .now)
            }
        }
    }

    /// Carries out one message read at `readAt`: decoded, counted, and handed to the
    /// client (an edit's time from `readAt` to the client's queue is measured).
    func handle(_ bytes: [UInt8], readAt: ContinuousClock.Instant) async {
        let decoded = PageFrame.decode(bytes)
        metrics.frameReceived((try? decoded.get())?.type ?? "invalid")
        switch decoded {
        case .failure(let problem):
            refuse(problem)
        case .success(.ping):
            send(PageJSON.pong)
        case .success(.watch(let room)):
            await watch(room)
        case .success(.edit(let ref, let room, let type, let sticker, let image, let frame)):
            let client = session.client
            let event = EditEvent(eventId: await client.nextId(), type: type, stickerId: sticker, timestamp: WallClock.now(), image: image, frame: frame)
            refs[event.eventId] = ref
            await client.post(event, in: room)
            metrics.frameToPublish.record(ContinuousClock.now - readAt)
        case .success(.member(let ref, let room, let type, let member, let role)):
            let client = session.client
            let event = EditEvent(eventId: await client.nextId(), type: type, member: member, role: role, timestamp: WallClock.now())
            refs[event.eventId] = ref
            await client.post(event, in: room)
        case .success(.dm(let ref, let type, let peer, let text)):
            let client = session.client
            let command = DMCommand(commandId: await client.nextId(), type: type, peer: peer, timestamp: WallClock.now(), text: text)
            refs[command.commandId] = ref
            await client.post(command)
        case .success(.history(let peer, let before)):
            // A query round trip: off the tab's reading, so that edits are not held up.
            let client = session.client
            Task { [weak self] in
                do {
                    let page = try await client.dmHistory(with: peer, before: before, limit: PageJSON.recentMessages)
                    await self?.send(PageJSON.history(page, before: before))
                } catch {
                    await self?.refuse(PageFrame.Problem(.unavailable, "the history with \(peer) could not be read: \(error)"))
                }
            }
        }
    }

    private func send(_ frame: JSON) {
        continuation.push(OutFrame(frame))
    }

    /// The watched room's latest state, as a frame, for the socket to write now.
    func takeRoom() -> (JSON, ContinuousClock.Instant)? {
        guard let pending = pendingRoom else { return nil }
        pendingRoom = nil
        return (PageJSON.room(pending.replica), pending.takenAt)
    }

    private func refuse(_ problem: PageFrame.Problem) {
        metrics.frameError(problem.code)
        send(PageJSON.error(problem))
    }

    private func watch(_ room: String) async {
        guard room != watchedRoom else {
            if let replica = await session.client.replica(of: room) { send(PageJSON.room(replica)) }
            return
        }
        roomTask?.cancel()
        watchedRoom = room
        pendingRoom = nil
        let updates: AsyncStream<RoomUpdate>
        do {
            updates = try await session.client.roomUpdates(room)
        } catch {
            refuse(PageFrame.Problem(.unavailable, "the room \(room) cannot be watched: \(error)"))
            return
        }
        if let replica = await session.client.replica(of: room) {
            send(PageJSON.room(replica))
            await session.notePeople(replica.members.map(\.userId), from: "room:\(room)")
        }
        roomTask = Task { [weak self] in
            var members: [RoomMember] = []
            for await update in updates {
                guard let self, !Task.isCancelled else { return }
                let takenAt = ContinuousClock.now
                if update.replica.members != members {
                    members = update.replica.members
                    await self.session.notePeople(members.map(\.userId), from: "room:\(room)")
                }
                await self.forward(update, of: room, takenAt: takenAt)
            }
        }
    }

    private func forward(_ update: RoomUpdate, of room: String, takenAt: ContinuousClock.Instant) {
        guard room == watchedRoom else { return }
        if case .noLongerMember = update.cause {
            pendingRoom = nil
            send(PageJSON.roomClosed(room))
            watchedRoom = nil
            return
        }
        // Coalesced: one frame queued at a time, carrying the room as it is when written.
        if let pending = pendingRoom {
            pendingRoom = (update.replica, pending.takenAt)
        } else {
            pendingRoom = (update.replica, takenAt)
            continuation.push(.latestRoom)
        }
    }

    private func followReceipts() async {
        let receipts = await session.client.receipts()
        receiptTask = Task { [weak self] in
            for await event in receipts {
                guard let self else { return }
                guard case .settled(let outgoing, let receipt) = event else { continue }
                await self.settled(outgoing.id, receipt)
            }
        }
    }

    private func settled(_ id: String, _ receipt: Receipt) {
        guard let ref = refs.removeValue(forKey: id) else { return }
        send(PageJSON.receipt(ref: ref, receipt))
    }

    func stop() {
        roomTask?.cancel()
        receiptTask?.cancel()
    }
}
