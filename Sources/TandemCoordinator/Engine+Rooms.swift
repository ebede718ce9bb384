import TandemCore

/// Rooms: edit events through the buffer, lock leases and presence expiry, and one
/// RoomChanges + one retained snapshot per changed room per step.
extension Engine {
    mutating func ingestRoomEvent(roomId: String, user: String, payload: [UInt8], now: Millis) -> [Publication] {
        switch EditEvent.decode(payload) {
        case .failure(let failure):
            return [receipt(.rejected(id: failure.id, kind: .room, failure.rejection, version: roomVersion(roomId)), to: user, arrivedAt: now, target: roomId)]
        case .success(let event):
            let item = Buffered(user: user, id: event.eventId, command: .room(roomId: roomId, event: event), payload: payload)
            return admit(item, kind: .room, timestamp: event.timestamp, currentVersion: roomVersion(roomId), now: now)
        }
    }

    func roomVersion(_ roomId: String) -> Int64? {
        if let packed = packedRooms[roomId] { return packed.version }
        guard let room = rooms[roomId], room.exists else { return nil }
        return room.version
    }

    mutating func applyRoomEvent(_ event: EditEvent, roomId: String, user: String, now: Millis, changes: inout BatchChanges) -> Receipt {
        unpackRoom(roomId)
        if event.type == .create, let room = rooms[roomId], room.stickerCount >= configuration.maxStickersPerRoom,
           room.sticker(event.stickerId) == nil, !room.isDeleted(event.stickerId) {
            return .rejected(id: event.eventId, kind: .room, Rejection(.roomFull, "room \(roomId) holds \(room.stickerCount) stickers, the most it may"), version: room.version)
        }
        let outcome: RoomOutcome
        if rooms[roomId] != nil {
            outcome = rooms[roomId]!.apply(event, from: user, now: now, lease: configuration.lockLeaseMs)
        } else {
            // A room exists from its first accepted event; a refused one leaves no trace.
            var room = RoomState(roomId: roomId)
            outcome = room.apply(event, from: user, now: now, lease: configuration.lockLeaseMs)
            if outcome.isAccepted { rooms[roomId] = room }
        }
        if let change = outcome.change {
            changes.room(roomId, change)
            trackLease(of: rooms[roomId]!)
        }
        return outcome.receipt(id: event.eventId)
    }

    /// Files the room's next lease deadline (entries that are no longer true are skipped
    /// when they come up).
    mutating func trackLease(of room: RoomState) {
        if let deadline = room.nextLeaseDeadline {
            leaseDeadlines.insert(LeaseDeadline(at: deadline, roomId: room.roomId))
        }
    }

    /// Leases that ran out, and locks of owners whose presence grace ran out.
    mutating func expireLocks(now: Millis, changes: inout BatchChanges) {
        while let next = leaseDeadlines.min, next.at <= now {
            _ = leaseDeadlines.removeMin()
            guard let deadline = rooms[next.roomId]?.nextLeaseDeadline, deadline <= now else { continue }
            let expired = rooms[next.roomId]!.expireLeases(now: now, stamp: wall)
            for change in expired { changes.room(next.roomId, change) }
            metrics.lockExpiries += expired.count
            trackLease(of: rooms[next.roomId]!)
        }
        for user in presence.takeExpired(now: now) {
            for roomId in rooms.keys.sorted() where rooms[roomId]!.stickers.contains(where: { $0.owner == user }) {
                let expired = rooms[roomId]!.expireLocks(ownedBy: user, now: now, stamp: wall)
                for change in expired { changes.room(roomId, change) }
                metrics.lockExpiries += expired.count
            }
        }
    }

    func publishRooms(_ changed: [String: [RoomChange]], order: [String], into step: inout Step) {
        for roomId in order {
            guard let room = rooms[roomId], let list = changed[roomId], !list.isEmpty else { continue }
            step.batch.entities.append(EntityRow(
                kind: EntityKind.room, key: roomId, version: room.version,
                body: room.persistedBytes(), updatedAt: room.updatedAt))
            if let roomChanges = RoomChanges(roomId: roomId, epoch: epoch, changes: list) {
                step.publications.append(Publication(topic: topics.roomChanges(room: roomId), payload: roomChanges.json().serialized()))
            }
            step.publications.append(roomSnapshot(room))
        }
    }

    func roomSnapshot(_ room: RoomState) -> Publication {
        Publication(topic: topics.roomState(room: room.roomId), payload: room.snapshotBytes(epoch: epoch), retain: true)
    }

    func packedRoomSnapshot(_ room: PackedRoom) -> Publication {
        Publication(topic: topics.roomState(room: room.roomId), payload: room.snapshotBytes(epoch: epoch), retain: true)
    }

    // MARK: Packed rooms

    /// Makes a packed room whole before an event touches it.
    mutating func unpackRoom(_ roomId: String) {
        guard let packed = packedRooms.removeValue(forKey: roomId) else { return }
        rooms[roomId] = packed.unpacked()
    }

    /// Rooms whole but unchanged for this long, and holding no lock, are packed again.
    static let roomIdleMs: Millis = 600_000

    /// Packs the rooms nobody changed for ``roomIdleMs`` (a room's `updatedAt` is its
    /// last change), so that a long run holds its busy rooms whole and the rest in a few
    /// bytes per sticker, as a restart does.
    /// At most ``packsPerPass`` at a time, to bound the pause.
    mutating func packIdleRooms(now: Millis) {
        var budget = Self.packsPerPass
        for (roomId, room) in rooms where budget > 0 && room.exists && now - room.updatedAt >= Self.roomIdleMs {
            if let packed = PackedRoom(room) {
                rooms[roomId] = nil
                packedRooms[roomId] = packed
                budget -= 1
            }
        }
    }

    static let packsPerPass = 1_000
}
