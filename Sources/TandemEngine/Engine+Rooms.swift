import TandemCore

/// Rooms: edit events through the buffer, lock leases and presence expiry, and one
/// RoomChanges + one retained snapshot per changed room per step.
extension Engine {
    mutating func ingestRoomEvent(roomId: String, user: String, payload: [UInt8], now: Millis) -> [Publication] {
        do throws(DecodeFailure) {
            let event = try EditEvent.decode(payload)
            let item = Buffered(user: user, id: event.eventId, command: .room(roomId: roomId, event: event), payload: payload)
            return admit(item, kind: .room, timestamp: event.timestamp, currentVersion: roomVersion(roomId), now: now)
        } catch {
            return [receipt(.rejected(id: error.id, kind: .room, error.rejection, version: roomVersion(roomId)), to: user, arrivedAt: now, target: roomId)]
        }
    }

    func roomVersion(_ roomId: String) -> Int64? {
        if let packed = packedRooms[roomId] { return packed.version }
        guard let room = rooms[roomId], room.exists else { return nil }
        return room.version
    }

    /// What membership checks need beside the room: the limit, and the broker's users
    /// when the service administers them.
    var membershipRules: MembershipRules.Context {
        MembershipRules.Context(maxMembers: configuration.maxRoomMembers, knownUsers: knownUsers)
    }

    mutating func applyRoomEvent(_ event: EditEvent, roomId: String, user: String, now: Millis, changes: inout BatchChanges) -> Receipt {
        unpackRoom(roomId)
        checkpointIfFirst(roomId, changes: &changes)
        if event.type == .create, let room = rooms[roomId], room.members.role(of: user)?.mayEdit == true,
           room.stickerCount >= configuration.maxStickersPerRoom, room.sticker(event.stickerId) == nil, !room.isDeleted(event.stickerId) {
            return .rejected(id: event.eventId, kind: .room, Rejection(.roomFull, "room \(roomId) holds \(room.stickerCount) stickers, the most it may"), version: room.version)
        }
        // Only a membership event or a room's first event can change its members.
        let before: RoomMembers? = event.type.isMembership || rooms[roomId] == nil ? rooms[roomId]?.members ?? RoomMembers() : nil
        let applied: RoomState.Applied
        if rooms[roomId] != nil {
            // In place: a copy out of the dictionary would copy the room's storage per event.
            applied = rooms[roomId]!.apply(event, from: user, now: now, lease: configuration.lockLeaseMs, rules: membershipRules, stamp: wall)
        } else {
            // A room exists from its first accepted event; a refused one leaves no trace.
            var room = RoomState(roomId: roomId)
            applied = room.apply(event, from: user, now: now, lease: configuration.lockLeaseMs, rules: membershipRules, stamp: wall)
            if applied.outcome.isAccepted {
                rooms[roomId] = room
                // Its history starts empty, at version 0: every version is restorable.
                checkpoint(RoomState(roomId: roomId), changes: &changes)
            }
        }
        guard applied.outcome.isAccepted else { return applied.outcome.receipt(id: event.eventId) }
        let room = rooms[roomId]!
        if let before, room.members != before, changes.membersBefore[roomId] == nil { changes.membersBefore[roomId] = before }
        for change in applied.changes { changes.room(roomId, change, timestamp: event.timestamp) }
        metrics.lockExpiries += applied.expired.count
        trackLease(of: room)
        // The receipt's version: the room after everything the event did.
        return .accepted(id: event.eventId, kind: .room, version: room.version)
    }

    /// A restore (CONTRACT "Room history, restore and cursors"): refused by the rules that
    /// need no history, else applied from the room as it was at its version once that is
    /// read (``pendingRoomLoad``). nil: it must be read first.
    mutating func applyRestore(_ event: EditEvent, roomId: String, user: String, changes: inout BatchChanges) -> Receipt? {
        unpackRoom(roomId)
        guard let room = rooms[roomId] else {
            return .rejected(id: event.eventId, kind: .room, Rejection(.notMember, "room \(roomId) does not exist: restore needs a member"), version: nil)
        }
        if let rejection = room.checkRestore(event, from: user, rules: membershipRules) {
            return .rejected(id: event.eventId, kind: .room, rejection, version: room.exists ? room.version : nil)
        }
        let request = RoomVersionRequest(roomId: roomId, version: event.restoreVersion ?? 0)
        guard let load = roomLoads.removeValue(forKey: request) else {
            pendingRoomLoad = request
            return nil
        }
        switch load {
        case .gone:
            return .rejected(id: event.eventId, kind: .room, Rejection(.historyGone, "version \(request.version) of room \(roomId) is older than the history kept"), version: room.version)
        case .failed:
            return .rejected(id: event.eventId, kind: .room, .invalid("the coordinator could not read the room's history: send the restore again with a new eventId"), version: room.version)
        case .stickers(let stickers):
            checkpointIfFirst(roomId, changes: &changes)
            let outcome = rooms[roomId]!.applyRestore(event, stickers: stickers, from: user)
            guard case .accepted(let change) = outcome else { return outcome.receipt(id: event.eventId) }
            changes.room(roomId, change, timestamp: event.timestamp)
            // Replays never cross a restore: the room after it is a checkpoint.
            checkpoint(rooms[roomId]!, changes: &changes)
            trackLease(of: rooms[roomId]!)
            return .accepted(id: event.eventId, kind: .room, version: change.version)
        }
    }

    /// The room whole, as its history's checkpoint at its version.
    mutating func checkpoint(_ room: RoomState, changes: inout BatchChanges) {
        changes.checkpoints.append(RoomCheckpointRow(
            roomId: room.roomId, version: room.version, loggedAt: changes.loggedAt, body: RoomHistory.checkpointBody(of: room)))
        lastCheckpoint[room.roomId] = room.version
    }

    /// Before this engine's first change of a room that exists: a checkpoint of it as it
    /// is (a room read at a start, or a partition's move, continues its history from there).
    mutating func checkpointIfFirst(_ roomId: String, changes: inout BatchChanges) {
        guard lastCheckpoint[roomId] == nil, let room = rooms[roomId], room.exists, !room.isClosed else { return }
        checkpoint(room, changes: &changes)
    }

    /// Files the room's next lease deadline (entries that are no longer true are skipped
    /// when they come up).
    mutating func trackLease(of room: RoomState) {
        if let deadline = room.nextLeaseDeadline {
            leaseDeadlines.push(LeaseDeadline(at: deadline, roomId: room.roomId))
        }
    }

    /// Leases that ran out, and locks of owners whose presence grace ran out.
    mutating func expireLocks(now: Millis, changes: inout BatchChanges) {
        while let next = leaseDeadlines.min, next.at <= now {
            _ = leaseDeadlines.popMin()
            guard let deadline = rooms[next.roomId]?.nextLeaseDeadline, deadline <= now else { continue }
            checkpointIfFirst(next.roomId, changes: &changes)
            let expired = rooms[next.roomId]!.expireLeases(now: now, stamp: wall)
            for change in expired { changes.room(next.roomId, change, timestamp: wall) }
            metrics.lockExpiries += expired.count
            trackLease(of: rooms[next.roomId]!)
        }
        for user in presence.takeExpired(now: now) {
            for roomId in rooms.keys.sorted() where rooms[roomId]!.stickers.contains(where: { $0.owner == user }) {
                checkpointIfFirst(roomId, changes: &changes)
                let expired = rooms[roomId]!.expireLocks(ownedBy: user, now: now, stamp: wall)
                for change in expired { changes.room(roomId, change, timestamp: wall) }
                metrics.lockExpiries += expired.count
            }
        }
    }

    mutating func publishRooms(_ changes: BatchChanges, into step: inout Step) {
        step.batch.roomHistory = changes.history
        step.batch.roomCheckpoints = changes.checkpoints
        for roomId in changes.roomOrder {
            guard let room = rooms[roomId], let list = changes.rooms[roomId], !list.isEmpty else { continue }
            // A checkpoint every so many versions bounds what a restore replays.
            if !room.isClosed, room.version - (lastCheckpoint[roomId] ?? 0) >= RoomHistory.checkpointInterval {
                step.batch.roomCheckpoints.append(RoomCheckpointRow(
                    roomId: roomId, version: room.version, loggedAt: changes.loggedAt, body: RoomHistory.checkpointBody(of: room)))
                lastCheckpoint[roomId] = room.version
            }
            step.batch.entities.append(EntityRow(
                kind: EntityKind.room, key: roomId, version: room.version,
                body: room.persistedBytes(), updatedAt: room.updatedAt))
            if let roomChanges = RoomChanges(roomId: roomId, epoch: epoch, changes: list) {
                step.publications.append(Publication(topic: topics.roomChanges(room: roomId), payload: roomChanges.serialized()))
            }
            if room.isClosed {
                // The last member left: the retained state goes (an empty retained message).
                step.publications.append(Publication(topic: topics.roomState(room: roomId), payload: [], retain: true))
            } else {
                step.publications.append(roomSnapshot(room))
            }
            if let before = changes.membersBefore[roomId] {
                step.batch.roomMembers.append(RoomMembersRow(roomId: roomId, members: room.members.rows(roomId: roomId)))
                publishMembership(of: room, before: before, into: &step)
            }
        }
    }

    /// Each member's own entry (`users/{userId}/rooms/{roomId}`) where it changed: new
    /// members, new roles, everyone when the owner changed; cleared for those gone. And
    /// the read rights the broker must give and take away, in the same step.
    func publishMembership(of room: RoomState, before: RoomMembers, into step: inout Step) {
        let ownerChanged = before.owner != room.members.owner
        for member in room.members.list {
            let previous = before.member(member.userId)
            if previous == nil { step.access.append(.grant(user: member.userId, room: room.roomId)) }
            if previous == nil || previous?.role != member.role || ownerChanged {
                step.publications.append(userRoomEntry(member, of: room.roomId, owner: room.members.owner, version: room.version))
            }
        }
        for member in before.list where !room.members.contains(member.userId) {
            step.access.append(.revoke(user: member.userId, room: room.roomId))
            step.publications.append(Publication(topic: topics.userRoom(user: member.userId, room: room.roomId), payload: [], retain: true))
        }
    }

    /// `{"roomId","role","owner","invitedBy","since","version"}`, retained.
    func userRoomEntry(_ member: RoomMember, of roomId: String, owner: String?, version: Int64) -> Publication {
        let json = JSON.obj([
            "roomId": .string(roomId),
            "role": .string(member.role.rawValue),
            "owner": JSON(owner),
            "invitedBy": JSON(member.invitedBy),
            "since": .int(member.since),
            "version": .int(version),
        ])
        return Publication(topic: topics.userRoom(user: member.userId, room: roomId), payload: json.serialized(), retain: true)
    }

    /// Every open room's readers: the broker's access rules as the database says they
    /// should be (reconciled at start, at a takeover and after the broker comes back).
    public var roomAccess: [String: Set<String>] {
        Self.readers(live: rooms.values, packed: packedRooms.values)
    }

    static func readers(live: some Sequence<RoomState>, packed: some Sequence<PackedRoom>) -> [String: Set<String>] {
        var readers: [String: Set<String>] = [:]
        for room in live where room.exists {
            for member in room.members.list { readers[member.userId, default: []].insert(room.roomId) }
        }
        for room in packed {
            for member in room.members.list { readers[member.userId, default: []].insert(room.roomId) }
        }
        return readers
    }

    /// The broker's users, when the service administers them: an invite of anyone else
    /// is `unknown_user`. nil: not known, anyone may be invited.
    public mutating func setKnownUsers(_ users: Set<String>?) {
        knownUsers = users
    }

    /// A room's retained snapshot and its members' own entries (republishing after a
    /// start); nothing for a closed room.
    func roomPublications(_ roomId: String) -> [Publication] {
        if let room = rooms[roomId], room.exists, !room.isClosed {
            return [roomSnapshot(room)] + room.members.list.map { userRoomEntry($0, of: roomId, owner: room.members.owner, version: room.version) }
        }
        if let packed = packedRooms[roomId], !packed.isClosed {
            return [packedRoomSnapshot(packed)] + packed.members.list.map { userRoomEntry($0, of: roomId, owner: packed.members.owner, version: packed.version) }
        }
        return []
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
