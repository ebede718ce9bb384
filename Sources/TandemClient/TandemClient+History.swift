import TandemCore

extension TandemClient {
    // MARK: History and restore

    /// One page of `room`'s history from the coordinator: its changes with a version
    /// below `before` (nil: all), newest first, at most `limit` (1-200; nil: the
    /// coordinator's 50), with the room's current version, the oldest version a restore
    /// can reach, and the epoch they belong to.
    ///
    /// - Throws: ``TandemClientError/queryRejected(code:message:)`` with `not_member`
    ///   when this user is not a member of the room or it does not exist (`invalid_payload`
    ///   for a bad `before` or `limit`, `rate_limited`), and as ``dmHistory(with:before:limit:)``
    ///   otherwise.
    public func history(room: String, before: Int64? = nil, limit: Int? = nil) async throws -> RoomHistoryAnswer {
        let response = try await query { RoomHistoryAnswer.request(requestId: $0, roomId: room, before: before, limit: limit) }
        return try RoomHistoryAnswer(json: response)
    }

    /// Returns `room` to what it was right after `version` (a version the history shows,
    /// at least its `oldest`, below the current one): its stickers become exactly what
    /// they were then, every lock released; membership does not change. One new version.
    /// Returns the receipt: rejected `forbidden` for a viewer, `invalid_payload` for a
    /// version not below the current one, `history_gone` for one older than the history
    /// keeps. An accepted restore (anyone's) clears this user's undo and redo in the room.
    public func restore(room: String, to version: Int64, timestamp: Millis = WallClock.now()) async throws -> Receipt {
        let event = EditEvent(eventId: ids.next(), restoringTo: version, timestamp: timestamp)
        return try await send(event, in: room, label: "restore \(room) to version \(version)")
    }

    // MARK: Undo and redo

    /// Undoes this user's last accepted create, update or delete in `room` that is not
    /// undone yet, by sending its inverse as an ordinary event (``UndoHistory`` says which,
    /// and what happens to locks). Returns its receipt, or nil when there is nothing to
    /// undo. A rejected one (`owned_by_other`: someone else holds the sticker now) changes
    /// nothing, and the app says so; whether the change stays on the stack for another try
    /// is ``UndoHistory``'s rule.
    ///
    /// Only edits this client sent while the room was watched (``room(_:)`` or
    /// ``roomUpdates(_:)``) are on the stack: an undo needs to know how the sticker looked
    /// before. An undo first waits for the receipts of the room's edits sent before it (an
    /// undo right after a move undoes that move, not the change before it). Undos and
    /// redos of one room run one after the other, each waiting for the one before. A
    /// restore of the room, a new epoch or leaving the room clears the stacks.
    ///
    /// - Throws: as ``send(_:in:label:)`` (the change stays on the stack).
    public func undo(room: String, timestamp: Millis = WallClock.now()) async throws -> Receipt? {
        try await inTurn(room) { try await $0.step(.undo, room: room, timestamp: timestamp) }
    }

    /// Applies again the change the last accepted ``undo(room:timestamp:)`` in `room` took
    /// back (a create again under a new id). Returns its receipt, or nil when there is
    /// nothing to redo. A new create, update or delete of this user's clears what could
    /// be redone. Throws as ``undo(room:timestamp:)``.
    public func redo(room: String, timestamp: Millis = WallClock.now()) async throws -> Receipt? {
        try await inTurn(room) { try await $0.step(.redo, room: room, timestamp: timestamp) }
    }

    /// This user's undo and redo stacks in `room` (nil: nothing recorded), for an app
    /// that shows what an undo would do ("Undo move").
    public func undoHistory(of room: String) -> UndoHistory? { undoHistories[room] }

    /// Runs `body` once every undo or redo asked for earlier in `room` is done.
    private func inTurn(
        _ room: String, _ body: @escaping @Sendable (isolated TandemClient) async throws -> Receipt?
    ) async throws -> Receipt? {
        let previous = undoQueue[room]
        let task = Task { () async throws -> Receipt? in
            await previous?.value
            return try await body(self)
        }
        undoQueue[room] = Task { _ = try? await task.value }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Returns once no edit of `room` this client sent so far (while the room was
    /// watched) waits for its receipt: what a script does before it reads the room's
    /// ``history(room:before:limit:)``, and what an undo does first.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled,
    ///   ``TandemClientError/closed`` when the client closes.
    public func waitForReceipts(in room: String) async throws {
        while roomOfEdit.values.contains(room) {
            if isClosed { throw TandemClientError.closed }
            try Task.checkCancellation()
            lastWaiterToken += 1
            let token = lastWaiterToken
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    if Task.isCancelled {
                        continuation.resume()
                    } else {
                        settleWaiters[room, default: [:]][token] = continuation
                    }
                }
            } onCancel: {
                Task { await self.stopWaitingForEdits(in: room, token: token) }
            }
        }
    }

    private func stopWaitingForEdits(in room: String, token: Int) {
        settleWaiters[room]?.removeValue(forKey: token)?.resume()
    }

    /// One undo or redo: its event, its receipt, the stacks, and the release after it.
    private func step(_ direction: UndoHistory.Direction, room: String, timestamp: Millis) async throws -> Receipt? {
        try await waitForReceipts(in: room)
        guard let history = undoHistories[room],
              let entry = direction == .undo ? history.undoStack.last : history.redoStack.last else { return nil }
        try Task.checkCancellation()
        let replica = rooms[room]?.replica
        let newId = "\(entry.sticker.prefix(40))-\(IdentifierGenerator.randomHex(12))"
        guard let step = history.nextStep(direction, eventId: ids.next(), timestamp: timestamp, newStickerId: newId,
                                          shown: { replica?.visibleSticker($0) }) else { return nil }
        let receipt: Receipt
        do {
            receipt = try await self.receipt(of: step.event.eventId) { post(step.event, in: room, label: step.label, undoable: false) }
        } catch {
            undoHistories[room]?.finish(step, .unanswered)
            throw error
        }
        guard receipt.status != .rejected else {
            undoHistories[room]?.finish(step, .rejected(receipt.code))
            return receipt
        }
        undoHistories[room]?.finish(step, .accepted)
        if step.releaseAfter {
            // The step took a lock this user did not hold: it goes back. Its outcome is
            // not the step's (the step is done), so a failure is only logged.
            let release = EditEvent(eventId: ids.next(), type: .release, stickerId: step.stickerAfter, timestamp: WallClock.now())
            do {
                let released = try await self.receipt(of: release.eventId) {
                    post(release, in: room, label: "release \(step.stickerAfter) after \(step.label)", undoable: false)
                }
                if released.status == .rejected { logger.info("release after \(step.label) refused: \(released.message)") }
            } catch {
                logger.info("release after \(step.label) unanswered: \(error)")
            }
        }
        return receipt
    }
}
