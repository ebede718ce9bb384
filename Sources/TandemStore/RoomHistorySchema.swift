import TandemCore

/// SQLite's tables and statements for room history (``RoomHistory``): a row per change,
/// and checkpoints (the room whole) indexed by when they were logged, for the retention.
enum RoomHistorySchema {
    static let sqlite = """
        CREATE TABLE room_history(
            room_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            event_id TEXT,
            user_id TEXT,
            type TEXT NOT NULL,
            sticker_id TEXT,
            at INTEGER NOT NULL,
            logged_at INTEGER NOT NULL,
            image TEXT,
            x REAL, y REAL, width REAL, height REAL,
            PRIMARY KEY(room_id, version)
        ) STRICT, WITHOUT ROWID;

        CREATE TABLE room_checkpoints(
            room_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            logged_at INTEGER NOT NULL,
            body BLOB NOT NULL,
            PRIMARY KEY(room_id, version)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX room_checkpoints_by_time ON room_checkpoints(logged_at);
        """

    /// A version written again (never in practice: a version is committed once) replaces
    /// the row.
    static let insertRow = """
        INSERT INTO room_history(room_id, version, event_id, user_id, type, sticker_id, at, logged_at, image, x, y, width, height)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
        ON CONFLICT(room_id, version) DO UPDATE SET
            event_id = excluded.event_id, user_id = excluded.user_id, type = excluded.type, sticker_id = excluded.sticker_id,
            at = excluded.at, logged_at = excluded.logged_at, image = excluded.image,
            x = excluded.x, y = excluded.y, width = excluded.width, height = excluded.height
        """

    static let insertCheckpoint = """
        INSERT INTO room_checkpoints(room_id, version, logged_at, body) VALUES (?1, ?2, ?3, ?4)
        ON CONFLICT(room_id, version) DO UPDATE SET logged_at = excluded.logged_at, body = excluded.body
        """

    static let selectRow = """
        SELECT room_id, version, event_id, user_id, type, sticker_id, at, logged_at, image, x, y, width, height FROM room_history
        """

    /// Each room's newest checkpoint logged before the cutoff (``ForgetHistory``): the
    /// rows below it go, at most `limit` of them, then the checkpoints below it.
    static let forgetRows = """
        WITH keep AS (SELECT room_id, max(version) AS version FROM room_checkpoints WHERE logged_at < ?1 GROUP BY room_id)
        DELETE FROM room_history WHERE (room_id, version) IN (
            SELECT h.room_id, h.version FROM keep JOIN room_history h ON h.room_id = keep.room_id AND h.version < keep.version
            LIMIT ?2)
        """
    static let forgetCheckpoints = """
        WITH keep AS (SELECT room_id, max(version) AS version FROM room_checkpoints WHERE logged_at < ?1 GROUP BY room_id)
        DELETE FROM room_checkpoints WHERE (room_id, version) IN (
            SELECT c.room_id, c.version FROM keep JOIN room_checkpoints c ON c.room_id = keep.room_id AND c.version < keep.version)
        """

    static let isMember = "SELECT 1 FROM room_members WHERE room_id = ?1 AND user_id = ?2"
    static let roomVersion = "SELECT version FROM entities WHERE kind = 'room' AND key = ?1"
    static let oldestCheckpoint = "SELECT min(version) FROM room_checkpoints WHERE room_id = ?1"
    static let checkpointAtOrBelow = """
        SELECT version, body FROM room_checkpoints WHERE room_id = ?1 AND version <= ?2 ORDER BY version DESC LIMIT 1
        """
}
