import TandemCore

extension TandemClient {
    // MARK: Rooms

    /// The room as this client sees it: a new ``RoomReplica`` value after every change
    /// (the retained snapshot, each RoomChanges applied in order, a snapshot after a gap
    /// or a new epoch, this client's own edits at once and their rollback on rejection).
    /// Changes that arrive before the first snapshot are ignored; the snapshot is taken
    /// once. A listener that falls behind skips to the latest replicas.
    public func room(_ id: String) async throws -> AsyncStream<RoomReplica> {
        try await watch(room: id)
        return rooms[id]!.replicas.listen()
    }

    /// The same room as ``room(_:)``, one ``RoomUpdate`` per change with its cause:
    /// for an app that says why the room changed (a rejection and its rollback, a lock
    /// of this user's that expired) and not only what it looks like. Nothing is
    /// dropped; a room already held starts with an ``RoomUpdate/Cause/initial`` update.
    public func roomUpdates(_ id: String) async throws -> AsyncStream<RoomUpdate> {
        try await watch(room: id)
        return rooms[id]!.updates.listen(first: initialUpdate(of: id))
    }

    /// What a new listener to ``roomUpdates(_:)`` starts with: the room as held, if any.
    func initialUpdate(of id: String) -> [RoomUpdate] {
        let replica = rooms[id]!.replica
        let held = replica.epoch != nil || !replica.pendingEventIds.isEmpty
        return held ? [RoomUpdate(cause: .initial, replica: replica)] : []
    }

    func watch(room id: String) async throws {
        guard rooms[id] == nil else { return }
        let watch = RoomWatch(replica: RoomReplica(roomId: id))
        rooms[id] = watch
        do {
            // The room list says when this user is no longer a member (the room itself
            // then goes quiet: the broker withholds it).
            try await followMemberships()
            let state = topics.roomState(room: id)
            if roomsSubscribed.contains(id), let transport = delivering {
                // Watched before: the subscription is there, its snapshots perhaps paused;
                // subscribed again, the broker sends the retained one. (Another transport
                // subscribes anew, as before.)
                transport.resumeSubscription(state)
                return
            }
            roomsSubscribed.insert(id)
            do {
                try await follow([state, topics.roomChanges(room: id)]) { client, message in
                    if message.topic == state {
                        client.receive(room: id, snapshot: message)
                    } else {
                        client.receive(room: id, changes: message)
                    }
                }
            } catch {
                roomsSubscribed.remove(id)
                throw error
            }
        } catch {
            // Not followed: the next watch tries again; whoever listens already hears
            // the end.
            if rooms[id] === watch {
                watch.replicas.finish()
                watch.updates.finish()
                rooms[id] = nil
            }
            throw error
        }
    }

    private func receive(room id: String, snapshot message: TransportMessage) {
        guard rooms[id] != nil, let snapshot = read("room snapshot", message, { (bytes) throws(Rejection) in
            if let shared = sharedDecodes { return try shared.roomSnapshot(message) }
            return try RoomSnapshot.decode(bytes)
        }) else { return }
        roomSnapshotsRead += 1
        let epochBefore = rooms[id]!.replica.epoch
        let applied = rooms[id]!.change { $0.snapshot(snapshot) }
        if let wanted = rooms[id]!.snapshotWanted {
            // Reached; or the room went on to an epoch neither held nor wanted.
            let reached = wanted.epoch == snapshot.epoch && snapshot.version >= wanted.version
            let elsewhere = applied && snapshot.epoch != wanted.epoch && snapshot.epoch != epochBefore
            if reached || elsewhere { rooms[id]!.snapshotWanted = nil }
        }
        guard applied else { return }
        let newEpoch = epochBefore != nil && epochBefore != snapshot.epoch
        // What the undo stacks name belongs to what was thrown away.
        if newEpoch { undoHistories[id]?.clear() }
        changed(room: id, .snapshot(snapshot, newEpoch: newEpoch))
    }

    private func receive(room id: String, changes message: TransportMessage) {
        guard rooms[id] != nil, let changes = read("room changes", message, { (bytes) throws(Rejection) in
            if let shared = sharedDecodes { return try shared.roomChanges(message) }
            return try RoomChanges.decode(bytes)
        }) else { return }
        let watch = rooms[id]!
        // Whose locks these expire is a question about the room before them.
        var expired: [RoomChange] = []
        if changes.changes.contains(where: { $0.type == .expire }) {
            let held = watch.replica.confirmedStickers
            expired = changes.changes.filter { change in
                change.type == .expire && held.first(where: { $0.id == change.stickerId })?.owner == user
            }
        }
        let applied = watch.change { $0.changes(changes) }
        if applied { followedOn(id) } else { askSnapshot(of: id, after: changes) }
        // The room went back to another version: this user's undo and redo were about a
        // room that is no more.
        if changes.changes.contains(where: { $0.type == .restore }) { undoHistories[id]?.clear() }
        changed(room: id, .changes(changes, applied: applied), expiredLocks: expired, replicaChanged: applied)
    }

    /// A change applied in step: the second within ``roomQuietAfter`` pauses the room's
    /// snapshots (``RoomWatch``).
    private func followedOn(_ id: String) {
        let watch = rooms[id]!
        let now = ContinuousClock.now
        defer { watch.lastChangeAt = now }
        guard let transport = delivering, !watch.snapshotsPaused, watch.snapshotWanted == nil,
              let last = watch.lastChangeAt, now - last < Self.roomQuietAfter else { return }
        watch.snapshotsPaused = true
        transport.pauseSubscription(topics.roomState(room: id))
        armResends()
    }

    /// Rooms whose snapshots are paused and that had no change for ``roomQuietAfter``:
    /// the retained snapshot again (``RoomWatch``). On the resend clock's tick.
    func resumeQuietRooms() {
        guard let transport = delivering else { return }
        let now = ContinuousClock.now
        for (id, watch) in rooms {
            if watch.snapshotsPaused {
                if let last = watch.lastChangeAt, now - last < Self.roomQuietAfter { continue }
                watch.snapshotsPaused = false
                transport.resumeSubscription(topics.roomState(room: id))
            } else if let wanted = watch.snapshotWanted, now - wanted.askedAt >= Self.roomQuietAfter {
                // A gap asked, and no snapshot got that far: the snapshot may have been
                // dropped (QoS 0) as the change was. Asked again, a few times.
                guard wanted.asks < Self.snapshotAsks else {
                    watch.snapshotWanted = nil
                    continue
                }
                watch.snapshotWanted!.askedAt = now
                watch.snapshotWanted!.asks += 1
                transport.resumeSubscription(topics.roomState(room: id))
            }
        }
        armResends()
    }

    /// Changes that do not follow on from the replica (a gap, a new epoch): the snapshot
    /// topic again, until a snapshot reaches them. Changes the replica already holds ask
    /// nothing.
    private func askSnapshot(of id: String, after changes: RoomChanges) {
        let replica = rooms[id]!.replica
        guard let transport = delivering, replica.epoch != nil, changes.roomId == id,
              changes.epoch != replica.epoch || changes.fromVersion > replica.version else { return }
        if let wanted = rooms[id]!.snapshotWanted, wanted.epoch == changes.epoch {
            // Already asked: the topic is subscribed until a snapshot gets this far.
            rooms[id]!.snapshotWanted!.version = max(wanted.version, changes.toVersion)
            return
        }
        rooms[id]!.snapshotWanted = RoomWatch.SnapshotAsk(epoch: changes.epoch, version: changes.toVersion, askedAt: ContinuousClock.now)
        rooms[id]!.snapshotsPaused = false
        transport.resumeSubscription(topics.roomState(room: id))
        armResends()
    }

    /// The last update of a watched room this user no longer belongs to, then the end of
    /// its streams. Watching it again starts anew.
    func endRoom(_ id: String, _ reason: RoomUpdate.RoomMembershipEnd) {
        guard rooms[id] != nil else { return }
        changed(room: id, .noLongerMember(reason), replicaChanged: false)
        rooms[id]!.replicas.finish()
        rooms[id]!.updates.finish()
        rooms[id] = nil
        undoHistories[id] = nil
    }

    /// Tells the room's listeners: every update to ``roomUpdates(_:)``, the replica to
    /// ``room(_:)`` when it changed.
    func changed(room id: String, _ cause: RoomUpdate.Cause, expiredLocks: [RoomChange] = [], replicaChanged: Bool = true) {
        let watch = rooms[id]!
        let replica = watch.replica
        if replicaChanged { watch.replicas.send(replica) }
        watch.updates.send(RoomUpdate(cause: cause, replica: replica, expiredLocks: expiredLocks))
    }

    /// The latest replica of a room watched with ``room(_:)`` or ``roomUpdates(_:)``,
    /// this client's edits included from the moment they are sent.
    public func replica(of room: String) -> RoomReplica? { rooms[room]?.replica }

    /// Edits a sticker: shown at once in the room's replicas (if the room is watched),
    /// sent until its receipt comes, rolled back if rejected. Returns the receipt.
    public func edit(
        _ type: EditEvent.Kind, sticker: String, in room: String, image: String? = nil, frame: Frame? = nil,
        timestamp: Millis = WallClock.now()
    ) async throws -> Receipt {
        let event = EditEvent(eventId: ids.next(), type: type, stickerId: sticker, timestamp: timestamp, image: image, frame: frame)
        return try await send(event, in: room)
    }

    // MARK: Members

    /// This user's rooms, from its own retained list (`users/{userId}/rooms/+`): the
    /// whole list (by room id) after every change, starting with what is held. A room
    /// appears when the user makes it or is invited, changes when its role or the owner
    /// changes, and goes when the user leaves or is removed, or the room closes.
    public func myRooms() async throws -> AsyncStream<[RoomMembership]> {
        try await followMemberships()
        return membershipListeners!.listen(first: [memberships.values.sorted { $0.roomId < $1.roomId }])
    }

    func followMemberships() async throws {
        guard membershipListeners == nil else { return }
        membershipListeners = Broadcast(buffering: .bufferingNewest(64))
        let prefix = topics.userRoom(user: user, room: "")
        try await follow([topics.userRoom(user: user, room: "+")]) { client, message in
            client.receive(membership: message, prefix: prefix)
        }
    }

    private func receive(membership message: TransportMessage, prefix: String) {
        guard message.topic.hasPrefix(prefix) else { return }
        let roomId = String(message.topic.dropFirst(prefix.count))
        if message.payload.isEmpty {
            guard memberships.removeValue(forKey: roomId) != nil else { return }
            endRoom(roomId, .removed)
            endCursors(roomId)
        } else {
            guard let entry = read("room entry", message, RoomMembership.decode), entry.roomId == roomId else { return }
            guard memberships[roomId] != entry else { return }
            memberships[roomId] = entry
        }
        membershipListeners?.send(memberships.values.sorted { $0.roomId < $1.roomId })
    }

    /// Invites `member` into `room` as an editor or a viewer (the owner only; a room
    /// that does not exist yet is made, with this user its owner). Returns the receipt.
    public func invite(_ member: String, to room: String, as role: MemberRole = .editor, timestamp: Millis = WallClock.now()) async throws -> Receipt {
        try await send(EditEvent(eventId: ids.next(), type: .invite, member: member, role: role, timestamp: timestamp), in: room)
    }

    /// Removes `member` from `room` (the owner only): it loses its locks and reads
    /// nothing more of the room.
    public func remove(_ member: String, from room: String, timestamp: Millis = WallClock.now()) async throws -> Receipt {
        try await send(EditEvent(eventId: ids.next(), type: .remove, member: member, timestamp: timestamp), in: room)
    }

    /// Makes `member` an editor or a viewer of `room` (the owner only).
    public func setRole(_ role: MemberRole, of member: String, in room: String, timestamp: Millis = WallClock.now()) async throws -> Receipt {
        try await send(EditEvent(eventId: ids.next(), type: .role, member: member, role: role, timestamp: timestamp), in: room)
    }

    /// Leaves `room`; an owner who leaves passes ownership on, the last member closes it.
    public func leave(_ room: String, timestamp: Millis = WallClock.now()) async throws -> Receipt {
        try await send(EditEvent(eventId: ids.next(), type: .leave, member: nil, timestamp: timestamp), in: room)
    }

    /// Sends an edit event built by the app (its own eventId) and returns its receipt.
    public func send(_ event: EditEvent, in room: String, label: String? = nil) async throws -> Receipt {
        try await receipt(of: event.eventId) { post(event, in: room, label: label) }
    }

    /// Sends an edit event without waiting: shown at once in the room's replicas (if
    /// the room is watched), its receipt on ``receipts()`` and ``roomUpdates(_:)``.
    /// `label` defaults to "type sticker". A create, update or delete sent while the room
    /// is watched goes on this user's undo stack once accepted (``undo(room:timestamp:)``).
    @discardableResult
    public func post(_ event: EditEvent, in room: String, label: String? = nil) -> Outgoing {
        post(event, in: room, label: label, undoable: true)
    }

    /// ``post(_:in:label:)``, saying whether the edit goes on the undo stack. `false` for
    /// an edit that continues one already there: a drag sends an update every 50 ms, and
    /// only its first should be recorded (with the look before the drag), so that one
    /// undo takes the whole gesture back and its redo goes to where it ended. The edit is
    /// shown, sent, resent and waited for like any other (an undo waits for its receipt).
    @discardableResult
    public func post(_ event: EditEvent, in room: String, label: String? = nil, undoable: Bool) -> Outgoing {
        if rooms[room] != nil {
            if undoable, event.type.namesSticker {
                undoHistories[room, default: UndoHistory()].sent(event, shown: rooms[room]!.replica.visibleSticker(event.stickerId))
            }
            if event.type == .restore { pendingRestores.insert(event.eventId) }
            let predicted = rooms[room]!.change { $0.applyLocal(event, as: user) }
            if let predicted {
                logger.info("\(event.type.rawValue) \(event.stickerId) will likely be rejected: \(predicted)")
            }
            changed(room: room, .localEdit(event, predicted: predicted))
            roomOfEdit[event.eventId] = room
        }
        return post(id: event.eventId, topic: topics.roomEvents(room: room, user: user), payload: event.json().serialized(),
                    label: label ?? "\(event.type.rawValue) \(event.type.isMembership ? event.member ?? room : event.stickerId)")
    }
}
