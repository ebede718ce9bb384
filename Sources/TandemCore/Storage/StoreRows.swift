
// The values that cross the store's actor boundary: plain Sendable structs, one per
// table row. They carry what the coordinator already decided; the store neither checks
// rules nor invents values (except an event-log `seq`, which SQLite assigns).

/// The `kind` of an `EntityRow`: one current-state blob per room, conversation, workout.
public enum EntityKind {
    public static let room = "room"
    public static let conversation = "conversation"
    public static let workout = "workout"
}

/// An inbound id already processed, remembered per sender for deduplication.
public struct SeenId: Sendable, Equatable {
    public var userId: String
    public var id: String
    public var kind: Receipt.Kind
    public var seenAt: Millis
    /// What its first copy got (accepted or rejected, code, version), if recorded.
    public var original: Receipt.Original?

    public init(userId: String, id: String, kind: Receipt.Kind, seenAt: Millis, original: Receipt.Original? = nil) {
        self.userId = userId
        self.id = id
        self.kind = kind
        self.seenAt = seenAt
        self.original = original
    }
}

/// One processed event or command and the receipt it got: the audit trail.
public struct EventLogRow: Sendable, Equatable {
    /// Assigned by the store in commit order; leave nil when writing.
    public var seq: Int64?
    /// When it was processed (the coordinator's clock).
    public var at: Millis
    public var kind: Receipt.Kind
    public var userId: String
    /// The room, conversation or workout the event was for.
    public var target: String
    public var id: String
    public var status: Receipt.Status
    public var code: ReceiptCode?
    public var version: Int64?
    /// The inbound payload as received, if the coordinator keeps it.
    public var payload: [UInt8]?

    public init(seq: Int64? = nil, at: Millis, kind: Receipt.Kind, userId: String, target: String, id: String,
                status: Receipt.Status, code: ReceiptCode?, version: Int64?, payload: [UInt8]?) {
        self.seq = seq
        self.at = at
        self.kind = kind
        self.userId = userId
        self.target = target
        self.id = id
        self.status = status
        self.code = code
        self.version = version
        self.payload = payload
    }
}

/// The current state of one room, conversation or workout, serialized by the coordinator.
/// Written as an upsert: the row for (kind, key) is replaced.
public struct EntityRow: Sendable, Equatable {
    /// One of `EntityKind`'s constants.
    public var kind: String
    public var key: String
    public var version: Int64
    public var body: [UInt8]
    public var updatedAt: Millis

    public init(kind: String, key: String, version: Int64, body: [UInt8], updatedAt: Millis) {
        self.kind = kind
        self.key = key
        self.version = version
        self.body = body
        self.updatedAt = updatedAt
    }
}

/// One direct message. `seq` numbers the messages of a conversation from 1, in the order
/// the coordinator appended them; (conversation, seq) is unique, and writing a seq twice
/// fails the whole batch (it would mean the coordinator lost count).
public struct DMMessageRow: Sendable, Equatable {
    public var conversation: String
    public var seq: Int64
    /// The commandId that sent it.
    public var id: String
    public var sender: String
    public var text: String
    public var sentAt: Millis
    public var isRead: Bool

    public init(conversation: String, seq: Int64, id: String, sender: String, text: String,
                sentAt: Millis, isRead: Bool) {
        self.conversation = conversation
        self.seq = seq
        self.id = id
        self.sender = sender
        self.text = text
        self.sentAt = sentAt
        self.isRead = isRead
    }
}

/// A conversation's row and its latest messages, oldest first: what a restart reads of it.
public struct StoredConversation: Sendable, Equatable {
    public var row: EntityRow
    /// The latest messages, oldest first (at most the window).
    public var latestMessages: [DMMessageRow]

    public init(row: EntityRow, latestMessages: [DMMessageRow]) {
        self.row = row
        self.latestMessages = latestMessages
    }
}

/// Marks every message from `sender` in `conversation` up to `throughSeq` read: what a
/// DM `read` command does, for the whole stored history (not only the messages a
/// snapshot shows). The bound keeps a message appended later in the same batch unread.
public struct DMReadMark: Sendable, Equatable {
    public var conversation: String
    public var sender: String
    public var throughSeq: Int64

    public init(conversation: String, sender: String, throughSeq: Int64 = .max) {
        self.conversation = conversation
        self.sender = sender
        self.throughSeq = throughSeq
    }
}

/// The summary of a finished workout.
public struct LogbookRow: Sendable, Equatable {
    public var userId: String
    public var workoutId: String
    public var startedAt: Millis
    public var endedAt: Millis
    /// "phone" or "watch".
    public var origin: String
    /// "standalone" or "mirrored".
    public var mode: String
    /// Metres.
    public var distance: Double
    /// Seconds.
    public var elapsedTime: Double
    /// Seconds per km; nil when the distance is 0.
    public var averagePace: Double?
    public var averageHeartRate: Double?
    public var maxHeartRate: Double?

    public init(userId: String, workoutId: String, startedAt: Millis, endedAt: Millis, origin: String, mode: String,
                distance: Double, elapsedTime: Double, averagePace: Double?, averageHeartRate: Double?,
                maxHeartRate: Double?) {
        self.userId = userId
        self.workoutId = workoutId
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.origin = origin
        self.mode = mode
        self.distance = distance
        self.elapsedTime = elapsedTime
        self.averagePace = averagePace
        self.averageHeartRate = averageHeartRate
        self.maxHeartRate = maxHeartRate
    }
}

/// Everything one coordinator batch persists, written by `SQLiteStore.commit` in one
/// transaction, in this order: forgotten seen ids, seen ids, event log, entities, new
/// messages, read marks, logbook (so a message appended and read in the same batch ends
/// up read).
/// One member of one room, as the store keeps it: a row of its own (`room_members`).
public struct RoomMemberRow: Sendable, Equatable {
    public var roomId: String
    public var userId: String
    /// `owner`, `editor` or `viewer`.
    public var role: String
    public var since: Millis
    public var invitedBy: String?
    /// Its place in the order members joined (0 first).
    public var position: Int

    public init(roomId: String, userId: String, role: String, since: Millis, invitedBy: String?, position: Int) {
        self.roomId = roomId
        self.userId = userId
        self.role = role
        self.since = since
        self.invitedBy = invitedBy
        self.position = position
    }
}

/// The upgrade to room membership (CONTRACT "Room membership", rooms that existed
/// before it), one statement both stores run in their migration: every user with an
/// accepted event in a room that exists becomes a member in the order of their first
/// accepted events, the first the owner, the others editors. (Valid SQL for SQLite and
/// PostgreSQL alike.)
public enum RoomMembersUpgrade {
    public static let fill = """
        INSERT INTO room_members(room_id, user_id, role, since, invited_by, position)
        SELECT target, user_id, CASE WHEN position = 0 THEN 'owner' ELSE 'editor' END, first_at, NULL, position
        FROM (
            SELECT target, user_id, first_at,
                   ROW_NUMBER() OVER (PARTITION BY target ORDER BY first_seq) - 1 AS position
            FROM (
                SELECT target, user_id, MIN(seq) AS first_seq, MIN(at) AS first_at
                FROM event_log
                WHERE kind = 'room' AND status = 'accepted'
                  AND target IN (SELECT key FROM entities WHERE kind = 'room')
                GROUP BY target, user_id
            ) AS firsts
        ) AS numbered
        """
}

/// A room's members after a batch, all of them: the store replaces the room's rows
/// with these (none left: a closed room).
public struct RoomMembersRow: Sendable, Equatable {
    public var roomId: String
    public var members: [RoomMemberRow]

    public init(roomId: String, members: [RoomMemberRow]) {
        self.roomId = roomId
        self.members = members
    }
}

public struct StoreBatch: Sendable, Equatable {
    /// Seen ids whose retention ran out, to delete.
    public var forgetSeenIds: ForgetSeenIds?
    /// Event-log rows past the retention, to delete.
    public var forgetEvents: ForgetEvents?
    public var seenIds: [SeenId]
    public var events: [EventLogRow]
    public var entities: [EntityRow]
    public var messages: [DMMessageRow]
    public var readMarks: [DMReadMark]
    public var logbook: [LogbookRow]
    /// Rooms whose members changed, each with its whole member list after the batch.
    public var roomMembers: [RoomMembersRow]
    /// Every room change of the batch, and the rooms whole where a checkpoint is due
    /// (``RoomHistory``).
    public var roomHistory: [RoomHistoryRow]
    public var roomCheckpoints: [RoomCheckpointRow]
    /// Room history past the retention, to delete.
    public var forgetHistory: ForgetHistory?

    public init(forgetSeenIds: ForgetSeenIds? = nil, forgetEvents: ForgetEvents? = nil, seenIds: [SeenId] = [], events: [EventLogRow] = [],
                entities: [EntityRow] = [], messages: [DMMessageRow] = [], readMarks: [DMReadMark] = [], logbook: [LogbookRow] = [],
                roomMembers: [RoomMembersRow] = [], roomHistory: [RoomHistoryRow] = [], roomCheckpoints: [RoomCheckpointRow] = [],
                forgetHistory: ForgetHistory? = nil) {
        self.forgetSeenIds = forgetSeenIds
        self.forgetEvents = forgetEvents
        self.seenIds = seenIds
        self.events = events
        self.entities = entities
        self.messages = messages
        self.readMarks = readMarks
        self.logbook = logbook
        self.roomMembers = roomMembers
        self.roomHistory = roomHistory
        self.roomCheckpoints = roomCheckpoints
        self.forgetHistory = forgetHistory
    }

    public var isEmpty: Bool {
        forgetSeenIds == nil && forgetEvents == nil && seenIds.isEmpty && events.isEmpty && entities.isEmpty && messages.isEmpty
            && readMarks.isEmpty && logbook.isEmpty && roomMembers.isEmpty && roomHistory.isEmpty && roomCheckpoints.isEmpty
            && forgetHistory == nil
    }
}

/// Seen ids first seen before `before` are deleted, the oldest first, at most `limit` of them: a batch
/// deletes about as many as it remembers, so forgetting costs each commit a share in
/// proportion, and a backlog (after a long stop) goes away a bounded piece at a time.
public struct ForgetSeenIds: Sendable, Equatable {
    public var before: Millis
    public var limit: Int

    public init(before: Millis, limit: Int) {
        self.before = before
        self.limit = limit
    }
}

/// Event-log rows processed before `before` are deleted, the oldest first, at most
/// `limit` of them, and only among the `limit` oldest rows: a batch deletes about as
/// many as it logs, so the log's retention costs each commit a bounded share (a few
/// pages at the start of the table, in both stores), and a backlog (a lowered
/// retention, a long stop) goes away a bounded piece at a time.
public struct ForgetEvents: Sendable, Equatable {
    public var before: Millis
    public var limit: Int

    public init(before: Millis, limit: Int) {
        self.before = before
        self.limit = limit
    }
}
