import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket
import Synchronization
import TandemClient

/// One browser tab's WebSocket: reads the page's frames (validated, paced by the
/// session), carries them out through the session's ``TandemClient``, and sends the
/// page what it shows (the room it watches, receipts of its own edits and commands,
/// and what the session shares with every tab).
///
/// A tab runs on its session's client's executor (``unownedExecutor``): what the client
/// hands it (the watched room's updates, cursors, receipts) is taken in the client's own
/// turn, with no task started for it, and its calls to the client stay on the executor.
actor Tab {
    let session: WebSession

    nonisolated var unownedExecutor: UnownedSerialExecutor { session.client.unownedExecutor }

    let id: Int
    private let continuation: AsyncStream<OutFrame>.Continuation
    private let metrics: WebMetrics
    private let logger: Logger
    /// The page's `ref` of each event or command this tab sent, by its id.
    private var refs: [String: String] = [:]
    /// The ids of this tab's drag updates that continue a drag (`continues`): the page
    /// shows the sticker under the pointer while it drags, so neither their echo (the
    /// room with the edit laid over, before the coordinator has it) nor an accepted
    /// receipt is written to it, only a rejection. A drag sends twenty a second.
    private var quietEdits: Set<String> = []
    /// The epoch and version of the last room frame written or queued: a quiet edit's
    /// accepted receipt that finds the room shown at its version changes nothing shown.
    private var shownVersion: (epoch: String?, version: Int64)?
    private var watchedRoom: String?
    /// The watched room's latest frame not yet written, and when the oldest change it
    /// holds was taken from the client (one ``OutFrame/latestRoom(watch:)`` is queued for it).
    /// Made on the tab's executor when the room changes, with the person's undo and redo
    /// as they are then; taken by the socket's writer, which needs no hop to the tab.
    private nonisolated let roomOut = Mutex<RoomOut?>(nil)

    private struct RoomOut: Sendable {
        let frame: ByteBuffer
        let takenAt: ContinuousClock.Instant
        /// The watch it is of (``watchCount``), as its mark says.
        let watch: Int
    }

    /// What the session's client says that this tab shows (the watched room's updates
    /// and cursors, the receipts), taken in the order it came: at once, in the client's
    /// turn that put it (the client's listeners are called on its executor, which is the
    /// tab's), or when ``Inbox/release()`` lets what waited go. No task of the tab waits
    /// on the client's streams, and none is started for an input.
    private nonisolated let inbox = Inbox<Input>()

    private enum Input: Sendable {
        /// Of the room watched as `watch` (``watchCount`` when it began).
        case room(watch: Int, room: String, RoomUpdate)
        case cursor(watch: Int, room: String, RoomCursor)
        case receipt(ReceiptEvent)
    }

    /// Counts the rooms watched: what comes for an earlier one is dropped.
    private var watchCount = 0
    /// The members of the watched room as its last update said them.
    private var roomMembers: [RoomMember] = []
    private var roomListening: Listening?
    private var receiptListening: Listening?
    /// Follows the watched room's cursors (the other members' pointers).
    private var cursorListening: Listening?
    private var stopped = false
    /// The room where this tab last showed the person's pointer: told `{}` when the
    /// pointer goes to another room or the tab closes.
    private var cursorShown: String?
    /// Undos and redos asked for and not answered yet (each waits for the ones before it).
    private var undosWaiting = 0
    /// The most undos and redos one tab may have waiting; the next gets `unavailable`.
    static let maxUndosWaiting = 32

    init(session: WebSession, id: Int, continuation: AsyncStream<OutFrame>.Continuation, metrics: WebMetrics, logger: Logger) {
        self.session = session
        self.id = id
        self.continuation = continuation
        self.metrics = metrics
        self.logger = logger
        // Every put is made on the client's executor (a listener's call, or the tab's own
        // release), which is this tab's: the inputs are taken there and then.
        inbox.attach { [weak self] in
            self?.assumeIsolated { $0.takeInputs() }
        }
    }

    /// Takes what the inbox holds, in the order it came, until it is empty.
    private func takeInputs() {
        while true {
            let inputs = inbox.take()
            if inputs.isEmpty { return }
            for input in inputs { take(input) }
        }
    }

    private func take(_ input: Input) {
        switch input {
        case .room(let watch, let room, let update):
            guard watch == watchCount else { return }
            let takenAt = ContinuousClock.now
            if case .changes(let changes, applied: true) = update.cause { timeUpdates(changes) }
            if update.replica.members != roomMembers {
                roomMembers = update.replica.members
                notePeople(roomMembers.map(\.userId), from: "room:\(room)")
            }
            forward(update, of: room, takenAt: takenAt)
        case .cursor(let watch, let room, let cursor):
            guard watch == watchCount else { return }
            forward(cursor, of: room)
        case .receipt(let event):
            guard case .settled(let outgoing, let receipt) = event else { return }
            settled(outgoing.id, receipt)
        }
    }

    /// The newest telling of the session who the page shows: the next one waits for it,
    /// so the session hears them in order.
    private var lastNote: Task<Void, Never>?

    /// Tells the session who the page shows from `source`, in a task (the session is an
    /// actor of its own; an input is taken without waiting).
    private func notePeople(_ users: [String], from source: String) {
        let previous = lastNote
        let session = session
        lastNote = Task.detached {
            await previous?.value
            await session.notePeople(users, from: source)
        }
    }

    /// How long each sticker update took from its editor (its timestamp) to this tab.
    private func timeUpdates(_ changes: RoomChanges) {
        let now = WallClock.now()
        for change in changes.changes where change.type == .update {
            guard let at = change.sticker?.updatedAt, at <= now else { continue }
            metrics.editToUpdate.record(.milliseconds(now - at))
        }
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
        await session.register(tab)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Ends when the session ends (its last frame says signedOut): then
                    // the socket is closed, which ends the reading too.
                    for await out in frames {
                        if let json = out.json {
                            try await outbound.write(.text(json.text))
                        } else if let (frame, takenAt) = tab.takeRoom(markedBy: out.watch) {
                            // The room's frame as RoomFrames keeps it: every tab showing
                            // this version with the same undo state writes the same buffer.
                            try await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .text, data: frame)))
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
        let decoded = Result { () throws(PageFrame.Problem) in try PageFrame.decode(bytes) }
        metrics.frameReceived((try? decoded.get())?.type ?? "invalid")
        switch decoded {
        case .failure(let problem):
            refuse(problem)
        case .success(.ping):
            send(PageJSON.pong)
        case .success(.watch(let room)):
            // In a task of its own, awaited (frames are still handled in order): following
            // a room goes deep (a subscription, its acknowledgement), and a task keeps the
            // memory its deepest call took for as long as it lives, which for the tab's
            // reading is as long as the tab (about 10 KB a tab, measured).
            await Task.detached { await self.watch(room) }.value
        case .success(.edit(let ref, let room, let type, let sticker, let image, let frame, let continues)):
            let client = session.client
            let event = EditEvent(eventId: await client.nextId(), type: type, stickerId: sticker, timestamp: WallClock.now(), image: image, frame: frame)
            refs[event.eventId] = ref
            if continues { quietEdits.insert(event.eventId) }
            // A drag's later updates stay off the person's undo stack (a drag sends twenty
            // a second): its first update is on it with the look before the drag, so one
            // Ctrl+Z puts the sticker back where the drag began, and the redo goes to where
            // it ended (UndoHistory keeps what an undo replaced).
            await client.post(event, in: room, label: continues ? "update \(sticker) (drag)" : nil, undoable: !continues)
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
            Task.detached { [weak self] in
                do {
                    let page = try await client.dmHistory(with: peer, before: before, limit: PageJSON.recentMessages)
                    await self?.send(PageJSON.history(page, before: before))
                } catch {
                    await self?.refuse(PageFrame.Problem(.unavailable, "the history with \(peer) could not be read: \(error)"))
                }
            }
        case .success(.undo(let ref, let room, let direction)):
            undo(ref: ref, room: room, direction)
        case .success(.restore(let ref, let room, let version)):
            let client = session.client
            let event = EditEvent(eventId: await client.nextId(), restoringTo: version, timestamp: WallClock.now())
            refs[event.eventId] = ref
            await client.post(event, in: room)
        case .success(.roomHistory(let room, let before)):
            // A query round trip, off the tab's reading like a chat's history.
            let client = session.client
            Task.detached { [weak self] in
                let frame: JSON
                do {
                    let answer = try await client.history(room: room, before: before, limit: PageFrame.historyPage)
                    frame = PageJSON.roomHistory(answer, before: before, limit: PageFrame.historyPage)
                } catch TandemClientError.queryRejected(let code, let message) {
                    frame = PageJSON.roomHistoryError(room: room, before: before, code: code, message: message)
                } catch {
                    frame = PageJSON.roomHistoryError(
                        room: room, before: before, code: PageFrame.Problem.Code.unavailable.rawValue,
                        message: "the history of \(room) could not be read: \(error)")
                }
                await self?.send(frame)
            }
        case .success(.cursor(let room, let position)):
            let client = session.client
            if let shown = cursorShown, shown != room { await client.clearCursor(room: shown) }
            if let position {
                await client.publishCursor(room: room, x: position.x, y: position.y)
                cursorShown = room
            } else {
                await client.clearCursor(room: room)
                cursorShown = nil
            }
        }
    }

    /// Undoes or redoes the person's last change in `room` through the session's client,
    /// off the tab's reading (it waits for the room's earlier receipts, then its own),
    /// and answers with an `undoResult` frame. Every tab of the session showing the room
    /// then gets the room again: what can be undone changed for all of them.
    private func undo(ref: String, room: String, _ direction: UndoHistory.Direction) {
        guard undosWaiting < Self.maxUndosWaiting else {
            refuse(PageFrame.Problem(.unavailable, "\(undosWaiting) undos and redos are still waiting: try again when they are done", ref: ref))
            return
        }
        undosWaiting += 1
        let session = session
        // In the order the page sent them: tasks started one after another may reach the
        // client in any order, and the stack's top must go to the first undo asked for.
        let previous = lastUndo
        lastUndo = Task.detached { [weak self] in
            await previous?.value
            let client = session.client
            var frame: JSON
            do {
                let receipt = direction == .undo ? try await client.undo(room: room) : try await client.redo(room: room)
                frame = PageJSON.undoResult(ref: ref, room: room, direction: direction, receipt: receipt)
                if let receipt, receipt.code == .ownedByOther {
                    // Refused because someone else holds the sticker now: say who. The
                    // step stays on its stack (it may pass later), so it names the sticker.
                    let history = await client.undoHistory(of: room)
                    let entry = direction == .undo ? history?.undoStack.last : history?.redoStack.last
                    let sticker = entry.flatMap { history?.currentId(of: $0.sticker) }
                    var holder: String?
                    if let sticker { holder = await client.replica(of: room)?.visibleSticker(sticker)?.owner }
                    frame = PageJSON.undoResult(ref: ref, room: room, direction: direction, receipt: receipt, sticker: sticker, holder: holder)
                }
            } catch {
                frame = PageJSON.error(PageFrame.Problem(.unavailable, "could not \(direction.rawValue) in \(room): \(error)", ref: ref))
            }
            await self?.undoFinished(frame)
            await session.undoChanged(in: room)
        }
    }

    /// The newest undo or redo under way: the next one waits for it.
    private var lastUndo: Task<Void, Never>?

    private func undoFinished(_ frame: JSON) {
        undosWaiting -= 1
        if frame["type"]?.stringValue == "error" { metrics.frameError(.unavailable) }
        send(frame)
    }

    /// What this person can undo or redo in `room` changed: the room goes out again,
    /// carrying it.
    func refreshRoom(_ room: String) {
        guard room == watchedRoom, let replica = session.client.assumeIsolated({ $0.replica(of: room) }) else { return }
        queueRoom(replica, takenAt: .now)
    }

    /// The room whole, written now (a tab that starts showing it, or asks again).
    private func show(_ replica: RoomReplica, undo: UndoHistory?) {
        send(PageJSON.room(replica, undo: undo))
        shownVersion = (replica.epoch, replica.version)
    }

    private func send(_ frame: JSON) {
        continuation.push(OutFrame(frame))
    }

    /// Queues `replica`'s frame, with what the person can undo and redo in it as of now
    /// (the client's stacks have taken every step its updates and receipts say, before it
    /// hands them on; an undo's or redo's own end comes as ``refreshRoom(_:)``). A frame
    /// still queued is replaced: the page gets the latest room, not every one.
    private func queueRoom(_ replica: RoomReplica, takenAt: ContinuousClock.Instant) {
        // On the client's executor, which is the tab's: asked there and then.
        let undo = session.client.assumeIsolated { client in
            client.undoHistory(of: replica.roomId).map { (canUndo: $0.canUndo, canRedo: $0.canRedo) }
        }
        let frame = session.roomFrames.frame(replica, canUndo: undo?.canUndo ?? false, canRedo: undo?.canRedo ?? false)
        shownVersion = (replica.epoch, replica.version)
        let watch = watchCount
        let queued = roomOut.withLock { out in
            let queued = out != nil
            out = RoomOut(frame: frame, takenAt: out?.takenAt ?? takenAt, watch: watch)
            return queued
        }
        if !queued { continuation.push(.latestRoom(watch: watch)) }
    }

    /// The watched room's latest frame, for the socket to write now at a mark queued by
    /// the tab's `watch`th room (nil: none queued, or the frame is of a later room, whose
    /// own mark follows the frames that start showing it).
    nonisolated func takeRoom(markedBy watch: Int) -> (ByteBuffer, ContinuousClock.Instant)? {
        roomOut.withLock { out in
            guard let queued = out, queued.watch == watch else { return nil }
            out = nil
            return (queued.frame, queued.takenAt)
        }
    }

    private func refuse(_ problem: PageFrame.Problem) {
        metrics.frameError(problem.code)
        send(PageJSON.error(problem))
    }

    private func watch(_ room: String) async {
        let client = session.client
        guard room != watchedRoom else {
            if let replica = await client.replica(of: room) { show(replica, undo: await client.undoHistory(of: room)) }
            return
        }
        roomListening?.stop()
        roomListening = nil
        cursorListening?.stop()
        cursorListening = nil
        watchCount += 1
        let watch = watchCount
        if let shown = cursorShown, shown != room {
            await client.clearCursor(room: shown)
            cursorShown = nil
        }
        watchedRoom = room
        roomOut.withLock { $0 = nil }
        shownVersion = nil
        roomMembers = []
        // The room's updates wait until its first frame is out (receipts too, for that
        // long: one inbox).
        inbox.hold()
        defer { inbox.release() }
        let inbox = inbox
        do {
            let listening = try await session.client.roomUpdates(room) { inbox.put(.room(watch: watch, room: room, $0)) }
            guard !stopped, watch == watchCount else {
                listening.stop()
                return
            }
            roomListening = listening
        } catch {
            refuse(PageFrame.Problem(.unavailable, "the room \(room) cannot be watched: \(error)"))
            return
        }
        if let replica = await client.replica(of: room) {
            show(replica, undo: await client.undoHistory(of: room))
            // Noted once: the room's first update, which says the same members, is not
            // told again.
            roomMembers = replica.members
            notePeople(roomMembers.map(\.userId), from: "room:\(room)")
        }
        inbox.release()
        // The other members' pointers; the room works without them.
        do {
            let listening = try await client.cursors(room: room) { inbox.put(.cursor(watch: watch, room: room, $0)) }
            guard !stopped, watch == watchCount, room == watchedRoom else {
                listening.stop()
                return
            }
            cursorListening = listening
        } catch {
            logger.info("cannot follow the cursors of \(room)", metadata: ["error": "\(error)"])
        }
    }

    private func forward(_ cursor: RoomCursor, of room: String) {
        guard room == watchedRoom else { return }
        send(PageJSON.cursor(room: room, cursor))
    }

    private func forward(_ update: RoomUpdate, of room: String, takenAt: ContinuousClock.Instant) {
        guard room == watchedRoom else { return }
        if case .noLongerMember = update.cause {
            roomOut.withLock { $0 = nil }
            send(PageJSON.roomClosed(room))
            watchedRoom = nil
            return
        }
        if roomOut.withLock({ $0 == nil }), quietlyShown(update) || alreadyShown(update) { return }
        queueRoom(update.replica, takenAt: takenAt)
    }

    /// Whether `update` is the room as this tab began to show it (or older): the room held
    /// when the client's stream began (`initial`), or the retained snapshot that
    /// confirms the version the tab showed from the client's replica. A version's
    /// content is the coordinator's; what the client lays over it changes only with an
    /// edit, a receipt or a rollback, which are updates of their own.
    private func alreadyShown(_ update: RoomUpdate) -> Bool {
        switch update.cause {
        case .initial, .snapshot(_, newEpoch: false):
            guard let shown = shownVersion else { return false }
            return shown.epoch == update.replica.epoch && update.replica.version <= shown.version
        default:
            return false
        }
    }

    /// Whether `update` shows this tab nothing new: the echo of one of its quiet edits
    /// (the page shows the drag itself), or such an edit's acceptance once the room was
    /// shown at the version that holds it (the edit's frame laid over the confirmed
    /// sticker again, which already has it). A predicted rejection, a rollback, a later
    /// version are shown.
    private func quietlyShown(_ update: RoomUpdate) -> Bool {
        switch update.cause {
        case .localEdit(let event, predicted: nil):
            return quietEdits.contains(event.eventId)
        case .receipt(let receipt, let outgoing):
            guard receipt.status != .rejected, quietEdits.contains(outgoing.id), let shown = shownVersion else { return false }
            return shown.epoch == update.replica.epoch && shown.version == update.replica.version
        default:
            return false
        }
    }

    private func followReceipts() async {
        let inbox = inbox
        let listening = await session.client.receipts { inbox.put(.receipt($0)) }
        if stopped { listening.stop() } else { receiptListening = listening }
    }

    private func settled(_ id: String, _ receipt: Receipt) {
        guard let ref = refs.removeValue(forKey: id) else { return }
        // The page waits for no acceptance of a drag's continuing updates (it keeps their
        // shared ref until the drag's release is answered): a rejection ends its drag.
        if quietEdits.remove(id) != nil, receipt.status != .rejected { return }
        send(PageJSON.receipt(ref: ref, receipt))
    }

    func stop() async {
        stopped = true
        inbox.close()
        roomListening?.stop()
        receiptListening?.stop()
        cursorListening?.stop()
        // The pointer of a tab that closed is no longer over the photo.
        if let shown = cursorShown {
            cursorShown = nil
            await session.client.clearCursor(room: shown)
        }
    }
}
