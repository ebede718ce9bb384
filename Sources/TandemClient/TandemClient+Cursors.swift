import TandemCore

extension TandemClient {
    // MARK: Cursors

    /// Shows this user's pointer at (`x`, `y`) over `room`'s photo, in the photo's pixels,
    /// to the room's other members (`rooms/{roomId}/cursors/{userId}`, QoS 0, not
    /// retained). At most 20 messages a second go out per room: a position offered sooner
    /// waits, and later ones replace it, so the last position of a burst is always sent.
    /// Nothing is queued while the broker is not reached (a cursor is only worth its
    /// latest value). Non-finite coordinates are not sent.
    public func publishCursor(room: String, x: Double, y: Double) {
        guard x.isFinite, y.isFinite else {
            logger.warning("cursor (\(x), \(y)) in \(room) not sent: coordinates must be finite")
            return
        }
        offerCursor(CursorPosition(x: x, y: y), room: room)
    }

    /// Says the pointer left `room`'s photo (`{}`), under the same pace as
    /// ``publishCursor(room:x:y:)``: it is never lost behind a position sent just before.
    /// ``close()`` says it for every room where the pointer is shown.
    public func clearCursor(room: String) {
        offerCursor(nil, room: room)
    }

    /// The other members' cursors in `room`: each member's position as it moves, and
    /// `position` nil when its pointer leaves the photo. Starts with the positions already
    /// held. This user's own cursors (from any of its clients) and malformed payloads are
    /// left out. The broker delivers them to members only; the stream ends when this user
    /// is no longer a member, or at ``close()``. A member who vanishes without a `{}`
    /// keeps its last position: an app fades cursors that stop moving, or follows
    /// presence. A listener that falls behind skips older positions.
    public func cursors(room: String) async throws -> AsyncStream<RoomCursor> {
        try await followCursors(room: room)
        return cursorWatches[room]!.listeners.listen(first: heldCursors(room: room))
    }

    func followCursors(room: String) async throws {
        if cursorWatches[room] == nil { cursorWatches[room] = CursorWatch() }
        if !cursorsSubscribed.contains(room) {
            cursorsSubscribed.insert(room)
            try await followMemberships()
            let prefix = topics.roomCursor(room: room, user: "")
            try await follow([topics.roomCursors(room: room)]) { client, message in
                client.receive(cursor: message, room: room, prefix: prefix)
            }
        }
    }

    /// What a new listener to ``cursors(room:)`` starts with: the positions held.
    func heldCursors(room: String) -> [RoomCursor] {
        cursorWatches[room]!.latest.sorted { $0.key < $1.key }.map { RoomCursor(userId: $0.key, position: $0.value) }
    }

    private func receive(cursor message: TransportMessage, room: String, prefix: String) {
        // Cursors are never retained: a retained one is someone's stale leftover.
        guard !message.retained, cursorWatches[room] != nil, message.topic.hasPrefix(prefix) else { return }
        let member = String(message.topic.dropFirst(prefix.count))
        guard member != user, Identifier.isValid(member), let position = CursorPosition.decode(message.payload) else { return }
        guard cursorWatches[room]!.latest[member] != position else { return }
        cursorWatches[room]!.latest[member] = position
        cursorWatches[room]!.listeners.send(RoomCursor(userId: member, position: position))
    }

    /// Ends `room`'s cursor listeners (this user is no longer a member).
    func endCursors(_ room: String) {
        cursorWatches[room]?.listeners.finish()
        cursorWatches[room] = nil
    }

    /// The time on the monotonic clock the throttles count on.
    private var cursorClock: Duration { ContinuousClock.now - clockOrigin }

    private func offerCursor(_ position: CursorPosition?, room: String) {
        guard Identifier.isValid(room) else {
            logger.warning("cursor not sent: \"\(room)\" is not a room id")
            return
        }
        switch cursorThrottles[room, default: CursorThrottle()].offer(position, at: cursorClock) {
        case .send(let position):
            sendCursor(position, room: room)
        case .wait(let until):
            let delay = until - cursorClock
            cursorFlushes[room] = Task { [weak self] in
                try? await Task.sleep(for: delay)
                guard !Task.isCancelled else { return }
                await self?.flushCursor(room: room)
            }
        case .held:
            break
        }
    }

    private func flushCursor(room: String) {
        cursorFlushes[room] = nil
        guard cursorThrottles[room] != nil else { return }
        if let position = cursorThrottles[room]!.flush(at: cursorClock) {
            sendCursor(position, room: room)
        } else if let due = cursorThrottles[room]!.flushDue {
            // Woken early: wait again for the rest.
            let delay = due - cursorClock
            cursorFlushes[room] = Task { [weak self] in
                try? await Task.sleep(for: delay)
                guard !Task.isCancelled else { return }
                await self?.flushCursor(room: room)
            }
        }
    }

    private func sendCursor(_ position: CursorPosition?, room: String) {
        do {
            try transport.enqueueAtMostOnce(topics.roomCursor(room: room, user: user), payload: CursorPosition.payload(position))
        } catch {
            logger.debug("cursor in \(room) not sent: \(error)")
        }
    }
}
