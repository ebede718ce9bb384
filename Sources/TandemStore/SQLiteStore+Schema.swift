import TandemCore

extension SQLiteStore {
    /// Tandem's schema history. Append only: a shipped migration never changes.
    ///
    /// Tables are STRICT (SQLite >= 3.37): a value of the wrong type is an error, not a
    /// silent conversion.
    static let migrations: [Migration] = [
        Migration(version: 1, name: "initial schema") { db in
            try db.execute("""
                CREATE TABLE meta(
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL
                ) STRICT;

                CREATE TABLE seen_ids(
                    user_id TEXT NOT NULL,
                    id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    seen_at INTEGER NOT NULL,
                    PRIMARY KEY(user_id, id)
                ) STRICT, WITHOUT ROWID;

                CREATE TABLE event_log(
                    seq INTEGER PRIMARY KEY,
                    at INTEGER NOT NULL,
                    kind TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    target TEXT NOT NULL,
                    id TEXT NOT NULL,
                    status TEXT NOT NULL,
                    code TEXT,
                    version INTEGER,
                    payload BLOB
                ) STRICT;

                CREATE TABLE entities(
                    kind TEXT NOT NULL,
                    key TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    body BLOB NOT NULL,
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY(kind, key)
                ) STRICT, WITHOUT ROWID;

                CREATE TABLE dm_messages(
                    conversation TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    id TEXT NOT NULL,
                    sender TEXT NOT NULL,
                    text TEXT NOT NULL,
                    sent_at INTEGER NOT NULL,
                    is_read INTEGER NOT NULL CHECK(is_read IN (0, 1)),
                    PRIMARY KEY(conversation, seq)
                ) STRICT;
                CREATE INDEX dm_messages_by_id ON dm_messages(conversation, id);
                CREATE INDEX dm_messages_by_time ON dm_messages(conversation, sent_at, seq);

                CREATE TABLE logbook(
                    user_id TEXT NOT NULL,
                    workout_id TEXT NOT NULL,
                    started_at INTEGER NOT NULL,
                    ended_at INTEGER NOT NULL,
                    origin TEXT NOT NULL,
                    mode TEXT NOT NULL,
                    distance REAL NOT NULL,
                    elapsed_time REAL NOT NULL,
                    average_pace REAL,
                    average_heart_rate REAL,
                    max_heart_rate REAL,
                    PRIMARY KEY(user_id, workout_id)
                ) STRICT;
                """)
            // The epoch is made here, once, in the same transaction that creates the
            // database: it exists exactly when the schema does.
            try db.run("INSERT INTO meta(key, value) VALUES ('epoch', ?1), ('created_at', ?2)",
                       [.text(makeEpoch()), .text(String(Platform.nowMillis()))])
        },
        // Pruning deletes by age; without this it scans the whole table.
        Migration(version: 2, name: "index seen ids by time",
                  sql: "CREATE INDEX seen_ids_by_time ON seen_ids(seen_at)"),
        // The outcome of each id's first copy, so that a resend after a lost receipt
        // (coordinator killed between commit and publish) learns what happened.
        Migration(version: 3, name: "remember each seen id's outcome") { db in
            try db.execute("ALTER TABLE seen_ids ADD COLUMN status TEXT")
            try db.execute("ALTER TABLE seen_ids ADD COLUMN code TEXT")
            try db.execute("ALTER TABLE seen_ids ADD COLUMN version INTEGER")
        },
        // Room membership (CONTRACT "Room membership"): a row per member. Rooms made
        // before it get members by the contract's rule, once: every user with an
        // accepted event in the room is an editor, the one with the earliest accepted
        // event its owner, in the order of their first accepted events.
        Migration(version: 4, name: "room members") { db in
            try db.execute("""
                CREATE TABLE room_members(
                    room_id TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    role TEXT NOT NULL CHECK(role IN ('owner', 'editor', 'viewer')),
                    since INTEGER NOT NULL,
                    invited_by TEXT,
                    position INTEGER NOT NULL,
                    PRIMARY KEY(room_id, user_id)
                ) STRICT, WITHOUT ROWID;
                """)
            try db.execute(RoomMembersUpgrade.fill)
        },
        // Room history (CONTRACT "Room history, restore and cursors"): a row per change
        // and the room whole now and then (`RoomHistory`). Rooms made before it start
        // their history with the first change after it.
        Migration(version: 5, name: "room history") { db in
            try db.execute(RoomHistorySchema.sqlite)
        },
    ]

    /// 16 lowercase hex digits from the system's secure generator.
    static func makeEpoch() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = String(generator.next() as UInt64, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
