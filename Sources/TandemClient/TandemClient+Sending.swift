import TandemCore

extension TandemClient {
    // MARK: Sending

    /// Publishes `payload` under `id` and returns its receipt, resending under the same
    /// id until one arrives. Cancelling the calling task stops the wait (the item stays
    /// pending and is still resent).
    public func send(id: String, topic: String, payload: [UInt8], label: String = "") async throws -> Receipt {
        try await receipt(of: id) { post(id: id, topic: topic, payload: payload, label: label) }
    }

    /// Publishes `payload` under `id` without waiting: it stays pending and is resent
    /// under the same id until its receipt, which comes on ``receipts()``. Items are
    /// published in the order posted. Returns what was sent.
    ///
    /// - Parameter label: what it was, for people ("move s1", "send bob"): it is in
    ///   the logs of resends and in what ``receipts()`` and ``settle(timeout:)`` return.
    @discardableResult
    public func post(id: String, topic: String, payload: [UInt8], label: String) -> Outgoing {
        let outgoing = Outgoing(id: id, topic: topic, payload: payload, label: label)
        tracker.sent(outgoing, at: WallClock.now())
        armResends()
        publish(outgoing)
        return outgoing
    }

    /// Registers a wait for the receipt of `id`, then sends it with `post`.
    func receipt(of id: String, _ post: () -> Void) async throws -> Receipt {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Receipt, any Error>) in
                if let previous = waiters.updateValue(continuation, forKey: id) {
                    previous.resume(throwing: CancellationError())
                }
                post()
            }
        } onCancel: {
            Task { await self.cancelWait(id) }
        }
    }

    private func cancelWait(_ id: String) {
        waiters.removeValue(forKey: id)?.resume(throwing: CancellationError())
    }

    /// Every receipt that concerns this client, in the order they arrive: the first
    /// receipt of each event or command it sent (with what was sent), and rejected
    /// telemetry. Nothing is dropped when the listener is slow. Ends at ``close()``.
    public func receipts() -> AsyncStream<ReceiptEvent> {
        receiptListeners.listen(first: [])
    }

    /// How many events and commands still wait for their receipt.
    public var pendingCount: Int { tracker.count }

    /// How many events and commands were rejected so far.
    public var rejectedCount: Int { tracker.rejectedCount }

    /// Waits until every event and command sent has its receipt, or `timeout` passes,
    /// then gives up on what is left: it is no longer resent, and a ``send(id:topic:payload:label:)``
    /// still waiting for it throws ``TandemClientError/noReceipt(id:)``. Returns what
    /// was given up, in the order sent (empty when everything was answered).
    public func settle(timeout: Duration) async -> [Outgoing] {
        let deadline = ContinuousClock.now + timeout
        while !tracker.isEmpty, ContinuousClock.now < deadline {
            do { try await Task.sleep(for: .milliseconds(50)) } catch { break }
        }
        let abandoned = tracker.abandonAll()
        armResends()
        for outgoing in abandoned {
            if let room = roomOfEdit.removeValue(forKey: outgoing.id) { editSettled(outgoing.id, in: room, accepted: false) }
            waiters.removeValue(forKey: outgoing.id)?.resume(throwing: TandemClientError.noReceipt(id: outgoing.id))
        }
        return abandoned
    }

    func receive(receiptMessage message: TransportMessage) {
        // A duplicate that carries its first copy's outcome counts as that outcome.
        guard let receipt = read("receipt", message, { (bytes) throws(Rejection) in try Receipt.decode(bytes).resolved }) else { return }
        let settlement = tracker.receipt(receipt)
        armResends()
        switch settlement {
        case .unknown:
            // Not ours (another client of this user), or already settled; telemetry is
            // never pending, and its rejections concern every device of the user.
            if receipt.kind == .workout, receipt.status == .rejected,
               receipt.id.hasPrefix("flight:") || receipt.id.hasPrefix("health:") {
                receiptListeners.send(.telemetryRejected(receipt))
            }
        case .acknowledged(let outgoing), .rejected(let outgoing):
            if let room = roomOfEdit.removeValue(forKey: receipt.id) {
                editSettled(receipt.id, in: room, accepted: receipt.status != .rejected)
                if rooms[room] != nil {
                    rooms[room]!.change { $0.receipt(receipt) }
                    changed(room: room, .receipt(receipt, outgoing))
                }
            }
            receiptListeners.send(.settled(outgoing, receipt))
            waiters.removeValue(forKey: receipt.id)?.resume(returning: receipt)
        }
    }

    /// An edit of a watched room got its receipt (or was given up on): the undo stack
    /// takes it, an accepted restore clears the stacks, and undos waiting for the room's
    /// earlier edits go on once none is left.
    private func editSettled(_ id: String, in room: String, accepted: Bool) {
        undoHistories[room]?.settled(id, accepted: accepted)
        if pendingRestores.remove(id) != nil, accepted { undoHistories[room]?.clear() }
        guard !roomOfEdit.values.contains(room), let waiting = settleWaiters.removeValue(forKey: room) else { return }
        for (_, waiter) in waiting { waiter.resume() }
    }

    /// The resend clock's tick (``ResendClock``): each second while something is pending.
    func resendDue() {
        for outgoing in tracker.dueForResend(at: WallClock.now()) {
            logger.info("no receipt for \(outgoing.id) (\(outgoing.label)) yet; resending")
            publish(outgoing)
        }
    }

    /// Hands it to the transport. One that cannot even be queued now is resent by the
    /// timer or the reconnect.
    func publish(_ outgoing: Outgoing) {
        do {
            try transport.enqueue(outgoing.topic, payload: outgoing.payload, retain: false)
        } catch {
            logger.info("publish of \(outgoing.id) failed (\(error)); it is resent later")
        }
    }
}
