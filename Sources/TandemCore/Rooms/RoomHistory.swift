/// A room's history as the store keeps it (CONTRACT "Room history, restore and cursors"):
/// a row per change (``RoomHistoryRow``), and now and then the room whole
/// (``RoomCheckpointRow``): at its first version, every ``checkpointInterval`` versions,
/// after each restore, and the first time a process changes a room it did not change
/// before. The room right after version V is the latest checkpoint at or below V with
/// the rows after it replayed (``replay(_:rows:)``): a restore reads at most a
/// checkpoint and ``checkpointInterval`` rows, whatever the room's age.
///
/// The rows are kept as long as the event log keeps events; a checkpoint goes with the
/// rows below the next one (``ForgetHistory``), so every kept version stays restorable.
public enum RoomHistory {
    /// A checkpoint at least every this many versions of a room.
    public static let checkpointInterval: Int64 = 100

    /// A checkpoint's body: the room's live stickers in creation order, locks left out
    /// (a restore releases them), in the room body's binary format.
    public static func checkpointBody(of room: RoomState) -> [UInt8] {
        checkpointBody(roomId: room.roomId, version: room.version, updatedAt: room.updatedAt, stickers: room.stickers)
    }

    public static func checkpointBody(roomId: String, version: Int64, updatedAt: Millis, stickers: [Sticker]) -> [UInt8] {
        let unlocked = stickers.map { sticker in
            var sticker = sticker
            sticker.owner = nil
            return sticker
        }
        let state = RoomState(roomId: roomId, version: version, updatedAt: updatedAt, stickers: unlocked, tombstones: [], leaseDeadlines: [:])
        return RoomBody.encode(state)
    }

    /// The stickers a checkpoint holds, in creation order.
    public static func stickers(inCheckpoint body: [UInt8]) throws(RoomState.PersistenceError) -> [Sticker] {
        var stickers: [Sticker] = []
        try RoomBody.read(body, header: { stickers.reserveCapacity($0.stickerCount) }, sticker: { sticker, _ in stickers.append(sticker) }, tombstone: { _ in })
        return stickers
    }

    /// The stickers after `rows` (consecutive versions, in order) are applied to those of a
    /// checkpoint: creates append, updates replace the image and frame, deletes remove;
    /// other changes (locks, expiries, members) leave the list as it is.
    public static func replay(_ stickers: [Sticker], rows: [RoomHistoryRow]) -> [Sticker] {
        var list: [Sticker?] = stickers
        var index: [String: Int] = [:]
        index.reserveCapacity(stickers.count)
        for (i, sticker) in stickers.enumerated() { index[sticker.id] = i }
        for row in rows {
            guard let id = row.stickerId else { continue }
            switch row.type {
            case .create:
                index[id] = list.count
                list.append(Sticker(
                    id: id, image: row.image ?? "", frame: row.frame ?? Frame(x: 0, y: 0, width: 1, height: 1), owner: nil,
                    createdBy: row.userId ?? "", updatedBy: row.userId ?? "", updatedAt: row.timestamp))
            case .update:
                guard let i = index[id], var sticker = list[i] else { continue }
                if let image = row.image { sticker.image = image }
                if let frame = row.frame { sticker.frame = frame }
                sticker.updatedBy = row.userId ?? sticker.updatedBy
                sticker.updatedAt = row.timestamp
                list[i] = sticker
            case .delete:
                guard let i = index.removeValue(forKey: id) else { continue }
                list[i] = nil
            case .acquire, .release, .expire, .invite, .remove, .role, .leave, .restore:
                continue
            }
        }
        return list.compactMap { $0 }
    }

    /// The answer to a `roomHistory` query.
    public static func response(requestId: String, roomId: String, epoch: String, page: RoomHistoryPage) -> JSON {
        .object([
            .init("requestId", .string(requestId)),
            .init("type", .string(ClientRequest.Kind.roomHistory.rawValue)),
            .init("roomId", .string(roomId)),
            .init("epoch", .string(epoch)),
            .init("version", .int(page.version)),
            .init("oldest", .int(page.oldest)),
            .init("entries", .array(page.entries.map(\.entryJSON))),
        ])
    }
}

/// One change of a room in its history: what a `roomHistory` entry shows, and for a
/// create or update the sticker's image and frame after it (what a replay needs).
public struct RoomHistoryRow: Sendable, Equatable {
    public var roomId: String
    public var version: Int64
    public var eventId: String?
    public var userId: String?
    public var type: RoomChange.Kind
    /// nil for membership changes and restores.
    public var stickerId: String?
    /// The event's timestamp (after ordering), or an expiry's time.
    public var timestamp: Millis
    /// When the coordinator logged it (its clock): what the retention counts from.
    public var loggedAt: Millis
    /// Create and update: the sticker's image and frame after the change.
    public var image: String?
    public var frame: Frame?

    public init(roomId: String, version: Int64, eventId: String?, userId: String?, type: RoomChange.Kind, stickerId: String?,
                timestamp: Millis, loggedAt: Millis, image: String? = nil, frame: Frame? = nil) {
        self.roomId = roomId
        self.version = version
        self.eventId = eventId
        self.userId = userId
        self.type = type
        self.stickerId = stickerId
        self.timestamp = timestamp
        self.loggedAt = loggedAt
        self.image = image
        self.frame = frame
    }

    /// The row for one change the engine made. `timestamp`: the event's (an expiry's is
    /// its sticker's `updatedAt`).
    public init(roomId: String, change: RoomChange, timestamp: Millis, loggedAt: Millis) {
        let named = !change.type.isMembership && change.type != .restore
        let carriesSticker = change.type == .create || change.type == .update
        self.init(
            roomId: roomId, version: change.version, eventId: change.eventId, userId: change.userId, type: change.type,
            stickerId: named ? change.stickerId : nil,
            timestamp: change.type == .expire ? change.sticker?.updatedAt ?? timestamp : timestamp, loggedAt: loggedAt,
            image: carriesSticker ? change.sticker?.image : nil, frame: carriesSticker ? change.sticker?.frame : nil)
    }

    /// `{"version","eventId","userId","type","stickerId","timestamp"}`, nulls written out.
    public var entryJSON: JSON {
        .object([
            .init("version", .int(version)),
            .init("eventId", JSON(eventId)),
            .init("userId", JSON(userId)),
            .init("type", .string(type.rawValue)),
            .init("stickerId", JSON(stickerId)),
            .init("timestamp", .int(timestamp)),
        ])
    }
}

/// A room whole at one version (``RoomHistory/checkpointBody(of:)``).
public struct RoomCheckpointRow: Sendable, Equatable {
    public var roomId: String
    public var version: Int64
    public var loggedAt: Millis
    public var body: [UInt8]

    public init(roomId: String, version: Int64, loggedAt: Millis, body: [UInt8]) {
        self.roomId = roomId
        self.version = version
        self.loggedAt = loggedAt
        self.body = body
    }
}

/// A page of a room's history, as a store reads it for a member.
public struct RoomHistoryPage: Sendable, Equatable {
    /// The room's version (as committed).
    public var version: Int64
    /// The oldest version a restore can still reach: its oldest checkpoint, and at least 1
    /// (a young room's first checkpoint is its empty state at version 0, which no restore
    /// may name).
    public var oldest: Int64
    /// Newest first.
    public var entries: [RoomHistoryRow]

    /// `oldestCheckpoint`: the room's oldest checkpoint's version, as the store reads it.
    public init(version: Int64, oldestCheckpoint: Int64, entries: [RoomHistoryRow]) {
        self.version = version
        self.oldest = max(1, oldestCheckpoint)
        self.entries = entries
    }
}

/// History past the retention, deleted a bounded piece at a time: for each room, its rows
/// and checkpoints below its newest checkpoint logged before `before` (so the versions
/// after that checkpoint stay restorable), at most `limit` rows a batch.
public struct ForgetHistory: Sendable, Equatable {
    public var before: Millis
    public var limit: Int

    public init(before: Millis, limit: Int) {
        self.before = before
        self.limit = limit
    }
}

/// Where a restore's room comes from: the room right after `version`, or that the
/// history no longer reaches it.
public struct RoomVersionRequest: Sendable, Hashable {
    public var roomId: String
    public var version: Int64

    public init(roomId: String, version: Int64) {
        self.roomId = roomId
        self.version = version
    }
}
