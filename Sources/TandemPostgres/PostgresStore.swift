#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import NIOCore
import PostgresNIO
import TandemStore
import TandemCore
import Synchronization

/// Tandem's database on PostgreSQL: the one owner of one connection, like the SQLite
/// `SQLiteStore`, and the same `CoordinatorStore` to the coordinator.
///
/// A store opened with a ``LeaderFence`` belongs to one leader term. Every commit
/// checks, inside its own transaction and under a share lock on the lease row, that the
/// term is still the database's: a takeover (which updates that row) waits for a commit
/// in progress, and a commit after a takeover fails with ``PostgresStoreError/Kind/fenced``.
/// So a deposed leader can never write, and a new leader's recovery reads every batch
/// the old one committed.
///
/// A commit whose connection is lost is retried on a new connection while the fence
/// still holds; the batch's number, written in the same transaction, tells a retry
/// whether the first try committed after all, so no batch is applied twice.
public actor PostgresStore: CoordinatorStore {
    public nonisolated let epoch: String
    public nonisolated let createdAt: Millis
    public nonisolated let url: PostgresURL
    public nonisolated var location: String { url.description }
    let fence: LeaderFence?
    let logger: Logger
    let link: PostgresLink
    /// Batches committed (or being committed) in this term.
    var batchNumber: Int64 = 0
    /// A commit is running; the continuations of those waiting for their turn, in order.
    private var commitBusy = false
    private var commitWaiting: [CheckedContinuation<Void, Never>] = []

    /// The leader term a store writes under, and how this process knows it still holds it.
    public struct LeaderFence: Sendable {
        public var term: Int64
        /// The lease's length: the server ends a leader's session left idle inside a
        /// transaction this long (a frozen process must not hold the lease row's share
        /// lock past the lease, or the takeover would wait for it to wake up).
        public var leaseMs: Int64
        /// False once this process's own deadline for the lease has passed (it stops
        /// retrying then: a standby may be about to take over).
        public var holds: @Sendable () -> Bool
        /// The partition whose lease row and commit marker the commits check and write
        /// (`partition_lease`, `partition_commit`); nil: the one leader's
        /// (`coordinator_lease`, `coordinator_commit`).
        public var partition: Int?

        public init(term: Int64, leaseMs: Int64, partition: Int? = nil, holds: @escaping @Sendable () -> Bool) {
            self.term = term
            self.leaseMs = leaseMs
            self.partition = partition
            self.holds = holds
        }
    }

    /// Connects, brings the schema up to date and reads the epoch. `fence`: the leader
    /// term the commits are checked against (nil: unfenced, for tools and tests).
    public static func open(url: PostgresURL, fence: LeaderFence?, logger: Logger) async throws -> PostgresStore {
        var settings: [(String, String)] = []
        if let fence { settings.append(("idle_in_transaction_session_timeout", String(max(200, fence.leaseMs)))) }
        let link = PostgresLink(url: url, role: fence.map { "leader term \($0.term)" } ?? "store", settings: settings, logger: logger)
        let connection = try await link.open()
        do {
            _ = try await PostgresSchema.migrate(connection, logger: logger)
            let (epoch, createdAt) = try await readMeta(connection, logger: logger)
            return PostgresStore(url: url, epoch: epoch, createdAt: createdAt, fence: fence, link: link, logger: logger)
        } catch {
            await link.drop()
            throw PostgresStoreError(doing: "open \(url)", error)
        }
    }

    /// A connection for reads only (queries, the operator's check): no migrations, no fence.
    public static func openReader(url: PostgresURL, logger: Logger) async throws -> PostgresStore {
        let link = PostgresLink(url: url, role: "reader", logger: logger)
        let connection = try await link.open()
        do {
            let (epoch, createdAt) = try await readMeta(connection, logger: logger)
            return PostgresStore(url: url, epoch: epoch, createdAt: createdAt, fence: nil, link: link, logger: logger)
        } catch {
            await link.drop()
            throw PostgresStoreError(doing: "open \(url) for reading", error)
        }
    }

    private init(url: PostgresURL, epoch: String, createdAt: Millis, fence: LeaderFence?, link: PostgresLink, logger: Logger) {
        self.url = url
        self.epoch = epoch
        self.createdAt = createdAt
        self.fence = fence
        self.link = link
        self.logger = logger
    }

    static func readMeta(_ connection: PostgresConnection, logger: Logger) async throws -> (String, Millis) {
        var values: [String: String] = [:]
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT key, value FROM meta WHERE key IN ('epoch', 'created_at')"), logger: logger)
        for try await (key, value) in rows.decode((String, String).self) { values[key] = value }
        guard let epoch = values["epoch"], !epoch.isEmpty else {
            throw PostgresStoreError(kind: .schema, message: "meta has no epoch: not a Tandem database")
        }
        return (epoch, values["created_at"].flatMap { Millis($0) } ?? 0)
    }

    public func close() async {
        await link.drop()
    }

    public func queryReader() async throws -> any CoordinatorStore {
        try await PostgresStore.openReader(url: url, logger: logger)
    }

    // MARK: Running statements

    /// Runs `body` on the connection; a failure comes back as a ``PostgresStoreError``
    /// and a lost connection is dropped, so the next call connects again.
    func withConnection<T>(_ what: @autoclosure () -> String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await body(try await link.open())
        } catch {
            let failure = PostgresStoreError(doing: what(), error)
            if failure.isConnectionLoss { await link.drop() }
            throw failure
        }
    }

    func rows<Row: Sendable>(
        _ sql: String, _ bindings: PostgresBindings = PostgresBindings(), _ what: String,
        _ make: (PostgresRow) throws -> Row
    ) async throws -> [Row] {
        try await withConnection(what) { connection in
            var out: [Row] = []
            for try await row in try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger) {
                out.append(try make(row))
            }
            return out
        }
    }

    // MARK: Writing

    /// The longest one attempt of a commit may wait for the server.
    static let commitAttemptTimeout: Duration = .seconds(5)

    public func commit(_ batch: StoreBatch) async throws {
        guard !batch.isEmpty else { return }
        // One batch at a time: the partitions' pipelines commit side by side, and an
        // actor's method gives way at every await, so without this two transactions would
        // interleave on the one connection (seen: a room's versions applied out of step
        // after a takeover). The number is taken in commit order, which the retry's
        // "already committed" check (`batch >= number`) relies on.
        await takeCommitTurn()
        defer { endCommitTurn() }
        batchNumber += 1
        let number = batchNumber
        var delayMs: UInt64 = 50
        var attempt = 0
        while true {
            if let fence, !fence.holds() {
                throw PostgresStoreError(kind: .fenced, message: "commit batch \(number) of term \(fence.term): this process's lease ran out before the database took it")
            }
            do {
                let connection = try await link.open()
                // A server that goes away mid-statement (a restart) can leave a query
                // waiting for an answer that never comes, and closing the connection
                // did not always end the wait (seen once in a few runs of the PostgreSQL
                // restart test: the leader hung for good after this warning). So no
                // attempt is waited for longer than this: it is given up on, its
                // connection closed, and the next attempt runs on a new one; the batch
                // marker keeps a retry from applying the batch twice.
                // Nor once this process's lease has run out: nothing it commits now may be
                // published, and a process cut from the database would otherwise end its
                // term only at the attempt's limit.
                let fence = self.fence
                let wasCommitted = try await Self.racing(deadline: Self.commitAttemptTimeout, giveUpWhen: { fence.map { !$0.holds() } ?? false }, onTimeout: { [logger] in
                    logger.warning("commit batch \(number): no answer for \(Self.commitAttemptTimeout), or the lease ran out meanwhile; closing the connection")
                    try? await connection.close()
                }, { [self, attempt] in
                    if attempt > 0, try await committed(term: fence?.term ?? 0, batch: number, on: connection) { return true }
                    try await write(batch, number: number, on: connection)
                    return false
                })
                if wasCommitted {
                    logger.notice("batch \(number) had committed before the connection was lost; not writing it again")
                } else if attempt > 0 {
                    logger.notice("batch \(number) committed after \(attempt) retries")
                }
                return
            } catch {
                let failure = error is AttemptTimedOut
                    ? PostgresStoreError(kind: .connection, message: "commit batch \(number): given up (no answer for \(Self.commitAttemptTimeout), or the lease ran out)")
                    : PostgresStoreError(doing: "commit batch \(number)", error)
                guard failure.isConnectionLoss else {
                    if let connection = link.connection {
                        _ = try? await connection.query(PostgresQuery(unsafeSQL: "ROLLBACK"), logger: logger)
                    }
                    throw failure
                }
                await link.drop()
                attempt += 1
                logger.warning("\(failure.message); retrying in \(delayMs) ms (attempt \(attempt))")
                try await Task.sleep(nanoseconds: delayMs * 1_000_000)
                delayMs = min(delayMs * 2, 1_000)
            }
        }
    }

    struct AttemptTimedOut: Error {}

    /// Lets one commit run at a time, the others waiting their turn in order.
    private func takeCommitTurn() async {
        guard commitBusy else {
            commitBusy = true
            return
        }
        await withCheckedContinuation { commitWaiting.append($0) }
    }

    private func endCommitTurn() {
        if commitWaiting.isEmpty {
            commitBusy = false
        } else {
            commitWaiting.removeFirst().resume()
        }
    }

    /// `body`'s result, or ``AttemptTimedOut`` once `deadline` has passed without one (or
    /// `giveUpWhen` says so, asked every 50 ms): then `onTimeout` runs and `body` is
    /// cancelled and left behind (a query stuck on a dead connection may never return;
    /// nothing waits for it).
    static func racing<T: Sendable>(
        deadline: Duration, giveUpWhen: (@Sendable () -> Bool)? = nil, onTimeout: @escaping @Sendable () async -> Void,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let race = Race<T>()
        return try await withCheckedThrowingContinuation { continuation in
            race.waiter.withLock { $0 = continuation }
            let timer = Task {
                if let giveUpWhen {
                    let end = ContinuousClock.now + deadline
                    while ContinuousClock.now < end, !giveUpWhen() {
                        guard (try? await Task.sleep(for: min(.milliseconds(50), end - ContinuousClock.now))) != nil else { return }
                    }
                } else {
                    guard (try? await Task.sleep(for: deadline)) != nil else { return }
                }
                guard let waiting = race.claim() else { return }
                waiting.resume(throwing: AttemptTimedOut())
                race.tasks.withLock { $0.work }?.cancel()
                await onTimeout()
            }
            let work = Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                guard let waiting = race.claim() else { return }
                race.tasks.withLock { $0.timer }?.cancel()
                waiting.resume(with: result)
            }
            race.tasks.withLock { $0 = (work, timer) }
        }
    }

    /// Who answers a ``racing(deadline:onTimeout:_:)`` first: the work or the timer.
    final class Race<T: Sendable>: Sendable {
        let waiter = Mutex<CheckedContinuation<T, any Error>?>(nil)
        let tasks = Mutex<(work: Task<Void, Never>?, timer: Task<Void, Never>?)>((nil, nil))

        /// The waiting continuation, once: the first caller gets it.
        func claim() -> CheckedContinuation<T, any Error>? { waiter.withLock { $0.take() } }
    }

    /// The commit marker's table, the lease's, and the key of this store's row in both:
    /// a partition's own (``LeaderFence/partition``), or the one leader's.
    var markerRows: (marker: String, lease: String, key: String) {
        if let partition = fence?.partition { return ("partition_commit", "partition_lease", "partition = \(partition)") }
        return ("coordinator_commit", "coordinator_lease", "id = 1")
    }

    /// Whether the commit marker says batch `number` of `term` is in the database.
    func committed(term: Int64, batch number: Int64, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT term, batch FROM \(markerRows.marker) WHERE \(markerRows.key)"), logger: logger)
        for try await (t, b) in rows.decode((Int64, Int64).self) { return t == term && b >= number }
        return false
    }

    private func run(_ connection: PostgresConnection, _ sql: String, _ bindings: PostgresBindings = PostgresBindings()) async throws {
        try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
    }

    /// One transaction: the fence and the marker, then each table in `StoreBatch`'s order,
    /// a statement per table with the rows as arrays (`unnest`), so a batch costs a
    /// handful of round trips whatever its size.
    private func write(_ batch: StoreBatch, number: Int64, on connection: PostgresConnection) async throws {
        try await run(connection, "BEGIN")
        // The fence and the marker in one statement: zero rows updated means the lease
        // row names another term. FOR SHARE makes a takeover wait for this transaction.
        // A partition's commits check its own lease row and write its own marker: the
        // partitions' leaders commit side by side, each fenced by its own term.
        let term = fence?.term
        let rows = markerRows
        let marked = try await connection.query(PostgresQuery(unsafeSQL: """
            UPDATE \(rows.marker) SET term = $1, batch = $2
            WHERE \(rows.key) AND ($3 OR EXISTS (SELECT 1 FROM \(rows.lease) WHERE \(rows.key) AND term = $1 FOR SHARE))
            RETURNING batch
            """, binds: binds(term ?? 0, number, term == nil)), logger: logger)
        var fenced = true
        for try await _ in marked { fenced = false }
        if fenced {
            try await run(connection, "ROLLBACK")
            throw PostgresStoreError(kind: .fenced, message: "commit batch \(number) of term \(term ?? 0): the database's lease names another term (another coordinator took over)")
        }

        if let forget = batch.forgetSeenIds {
            try await run(connection, """
                DELETE FROM seen_ids WHERE (user_id, id) IN (SELECT user_id, id FROM seen_ids WHERE seen_at < $1 ORDER BY seen_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                """, binds(forget.before, Int64(forget.limit)))
        }
        if let forget = batch.forgetEvents {
            // As on SQLite: among the oldest rows by seq (the primary key's first pages).
            try await run(connection, """
                DELETE FROM event_log WHERE seq IN (SELECT seq FROM event_log ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED) AND at < $1
                """, binds(forget.before, Int64(forget.limit)))
        }
        if !batch.seenIds.isEmpty {
            let s = batch.seenIds
            try await run(connection, """
                INSERT INTO seen_ids(user_id, id, kind, seen_at, status, code, version)
                SELECT u, i, k, t, NULLIF(st, ''), NULLIF(c, ''), NULLIF(v, \(Int64.min))
                FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::text[], $7::int8[]) AS x(u, i, k, t, st, c, v)
                ON CONFLICT (user_id, id) DO NOTHING
                """, binds(
                    s.map(\.userId), s.map(\.id), s.map(\.kind.rawValue), s.map(\.seenAt),
                    s.map { $0.original?.status.rawValue ?? "" }, s.map { $0.original?.code?.rawValue ?? "" },
                    s.map { $0.original?.version ?? .min }))
        }
        if !batch.events.isEmpty {
            let e = batch.events
            try await run(connection, """
                INSERT INTO event_log(at, kind, user_id, target, id, status, code, version, payload)
                SELECT a, k, u, t, i, st, NULLIF(c, ''), NULLIF(v, \(Int64.min)), CASE WHEN hp THEN p END
                FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int8[],
                            $9::bool[], $10::bytea[]) WITH ORDINALITY AS x(a, k, u, t, i, st, c, v, hp, p, n)
                ORDER BY n
                """, binds(
                    e.map(\.at), e.map(\.kind.rawValue), e.map(\.userId), e.map(\.target), e.map(\.id),
                    e.map(\.status.rawValue), e.map { $0.code?.rawValue ?? "" }, e.map { $0.version ?? .min },
                    e.map { $0.payload != nil }, e.map { ByteBuffer(bytes: $0.payload ?? []) }))
        }
        if !batch.entities.isEmpty {
            // One row per key (the last write wins, as with SQLite's upserts in order):
            // ON CONFLICT DO UPDATE may not touch a row twice in one statement.
            let rows = Self.lastPerKey(batch.entities) { "\($0.kind)\u{1}\($0.key)" }
            try await run(connection, """
                INSERT INTO entities(kind, key, version, body, updated_at)
                SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::bytea[], $5::int8[])
                ON CONFLICT (kind, key) DO UPDATE SET
                    version = excluded.version, body = excluded.body, updated_at = excluded.updated_at
                """, binds(
                    rows.map(\.kind), rows.map(\.key), rows.map(\.version), rows.map { ByteBuffer(bytes: $0.body) },
                    rows.map(\.updatedAt)))
        }
        if !batch.messages.isEmpty {
            let m = batch.messages
            try await run(connection, """
                INSERT INTO dm_messages(conversation, seq, id, sender, text, sent_at, is_read)
                SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::bytea[], $6::int8[], $7::bool[])
                """, binds(
                    m.map(\.conversation), m.map(\.seq), m.map(\.id), m.map(\.sender),
                    m.map { ByteBuffer(bytes: Array($0.text.utf8)) }, m.map(\.sentAt), m.map(\.isRead)))
        }
        if !batch.readMarks.isEmpty {
            let r = batch.readMarks
            try await run(connection, """
                UPDATE dm_messages AS d SET is_read = true
                FROM unnest($1::text[], $2::text[], $3::int8[]) AS m(conversation, sender, through)
                WHERE d.conversation = m.conversation AND d.sender = m.sender AND d.seq <= m.through AND NOT d.is_read
                """, binds(r.map(\.conversation), r.map(\.sender), r.map(\.throughSeq)))
        }
        if !batch.roomMembers.isEmpty {
            // A room's rows are replaced whole; a room twice in one batch: its last list.
            let rooms = Self.lastPerKey(batch.roomMembers) { $0.roomId }
            try await run(connection, "DELETE FROM room_members WHERE room_id = ANY($1::text[])", binds(rooms.map(\.roomId)))
            let m = rooms.flatMap(\.members)
            if !m.isEmpty {
                try await run(connection, """
                    INSERT INTO room_members(room_id, user_id, role, since, invited_by, position)
                    SELECT r, u, ro, s, NULLIF(i, ''), p::int
                    FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::int8[]) AS x(r, u, ro, s, i, p)
                    """, binds(
                        m.map(\.roomId), m.map(\.userId), m.map(\.role), m.map(\.since), m.map { $0.invitedBy ?? "" },
                        m.map { Int64($0.position) }))
            }
        }
        if let forget = batch.forgetHistory {
            // Each room's newest checkpoint logged before the cutoff stays; what is below it goes.
            try await run(connection, """
                WITH keep AS (SELECT room_id, max(version) AS version FROM room_checkpoints WHERE logged_at < $1 GROUP BY room_id)
                DELETE FROM room_history WHERE (room_id, version) IN (
                    SELECT h.room_id, h.version FROM keep JOIN room_history h ON h.room_id = keep.room_id AND h.version < keep.version
                    LIMIT $2)
                """, binds(forget.before, Int64(forget.limit)))
            try await run(connection, """
                WITH keep AS (SELECT room_id, max(version) AS version FROM room_checkpoints WHERE logged_at < $1 GROUP BY room_id)
                DELETE FROM room_checkpoints c USING keep WHERE c.room_id = keep.room_id AND c.version < keep.version
                """, binds(forget.before))
        }
        if !batch.roomHistory.isEmpty {
            let h = Self.lastPerKey(batch.roomHistory) { "\($0.roomId)\u{1}\($0.version)" }
            let nan = Double.nan
            try await run(connection, """
                INSERT INTO room_history(room_id, version, event_id, user_id, type, sticker_id, at, logged_at, image, x, y, width, height)
                SELECT r, v, NULLIF(e, ''), NULLIF(u, ''), t, NULLIF(s, ''), a, l, NULLIF(i, ''), NULLIF(x, 'NaN'::float8),
                       NULLIF(y, 'NaN'::float8), NULLIF(w, 'NaN'::float8), NULLIF(hh, 'NaN'::float8)
                FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::int8[],
                            $9::text[], $10::float8[], $11::float8[], $12::float8[], $13::float8[]) AS x0(r, v, e, u, t, s, a, l, i, x, y, w, hh)
                ON CONFLICT (room_id, version) DO UPDATE SET
                    event_id = excluded.event_id, user_id = excluded.user_id, type = excluded.type, sticker_id = excluded.sticker_id,
                    at = excluded.at, logged_at = excluded.logged_at, image = excluded.image,
                    x = excluded.x, y = excluded.y, width = excluded.width, height = excluded.height
                """, binds(
                    h.map(\.roomId), h.map(\.version), h.map { $0.eventId ?? "" }, h.map { $0.userId ?? "" },
                    h.map(\.type.rawValue), h.map { $0.stickerId ?? "" }, h.map(\.timestamp), h.map(\.loggedAt),
                    h.map { $0.image ?? "" }, h.map { $0.frame?.x ?? nan }, h.map { $0.frame?.y ?? nan },
                    h.map { $0.frame?.width ?? nan }, h.map { $0.frame?.height ?? nan }))
        }
        if !batch.roomCheckpoints.isEmpty {
            let c = Self.lastPerKey(batch.roomCheckpoints) { "\($0.roomId)\u{1}\($0.version)" }
            try await run(connection, """
                INSERT INTO room_checkpoints(room_id, version, logged_at, body)
                SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::bytea[])
                ON CONFLICT (room_id, version) DO UPDATE SET logged_at = excluded.logged_at, body = excluded.body
                """, binds(c.map(\.roomId), c.map(\.version), c.map(\.loggedAt), c.map { ByteBuffer(bytes: $0.body) }))
        }
        if !batch.logbook.isEmpty {
            let l = Self.lastPerKey(batch.logbook) { "\($0.userId)\u{1}\($0.workoutId)" }
            let nan = Double.nan
            try await run(connection, """
                INSERT INTO logbook(user_id, workout_id, started_at, ended_at, origin, mode, distance, elapsed_time,
                                    average_pace, average_heart_rate, max_heart_rate)
                SELECT u, w, s, e, o, m, d, t, NULLIF(p, 'NaN'::float8), NULLIF(a, 'NaN'::float8), NULLIF(x, 'NaN'::float8)
                FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::text[], $6::text[], $7::float8[],
                            $8::float8[], $9::float8[], $10::float8[], $11::float8[]) AS r(u, w, s, e, o, m, d, t, p, a, x)
                ON CONFLICT (user_id, workout_id) DO UPDATE SET
                    started_at = excluded.started_at, ended_at = excluded.ended_at, origin = excluded.origin,
                    mode = excluded.mode, distance = excluded.distance, elapsed_time = excluded.elapsed_time,
                    average_pace = excluded.average_pace, average_heart_rate = excluded.average_heart_rate,
                    max_heart_rate = excluded.max_heart_rate
                """, binds(
                    l.map(\.userId), l.map(\.workoutId), l.map(\.startedAt), l.map(\.endedAt), l.map(\.origin), l.map(\.mode),
                    l.map(\.distance), l.map(\.elapsedTime), l.map { $0.averagePace ?? nan },
                    l.map { $0.averageHeartRate ?? nan }, l.map { $0.maxHeartRate ?? nan }))
        }
        try await run(connection, "COMMIT")
    }

    /// The rows with the last occurrence of each key kept, in the order of those last occurrences.
    static func lastPerKey<Row>(_ rows: [Row], key: (Row) -> String) -> [Row] {
        var last: [String: Int] = [:]
        for (index, row) in rows.enumerated() { last[key(row)] = index }
        guard last.count < rows.count else { return rows }
        return rows.indices.filter { last[key(rows[$0])] == $0 }.map { rows[$0] }
    }

    // MARK: Reading

    public func loadEntities(kind: String) async throws -> [EntityRow] {
        try await rows(
            "SELECT kind, key, version, body, updated_at FROM entities WHERE kind = $1 ORDER BY key", binds(kind),
            "load \(kind) rows"
        ) { row in
            let (kind, key, version, body, updatedAt) = try row.decode((String, String, Int64, ByteBuffer, Int64).self)
            return EntityRow(kind: kind, key: key, version: version, body: Array(body.readableBytesView), updatedAt: updatedAt)
        }
    }

    public func loadRoomMembers() async throws -> [RoomMemberRow] {
        try await rows(
            "SELECT room_id, user_id, role, since, invited_by, position FROM room_members ORDER BY room_id, position",
            binds(), "load room members"
        ) { row in
            let (roomId, userId, role, since, invitedBy, position) = try row.decode((String, String, String, Int64, String?, Int32).self)
            return RoomMemberRow(roomId: roomId, userId: userId, role: role, since: since, invitedBy: invitedBy, position: Int(position))
        }
    }

    public func loadSeenIds(since: Millis) async throws -> [SeenId] {
        try await rows("\(Self.selectSeenId) WHERE seen_at >= $1", binds(since), "load remembered ids", Self.seenId)
    }

    /// The same rows as ``loadSeenIds(since:)``, as digests made from the raw bytes of
    /// each row: no string per id.
    public func loadSeenDigests(since: Millis) async throws -> IdDigests {
        try await withConnection("load remembered ids") { connection in
            var digests = IdDigests(since: since)
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT user_id, id, seen_at FROM seen_ids WHERE seen_at >= $1", binds: binds(since)), logger: logger)
            for try await (user, id, seenAt) in rows.decode((ByteBuffer, ByteBuffer, Int64).self) {
                user.withUnsafeReadableBytes { u in
                    id.withUnsafeReadableBytes { i in digests.insert(user: u, id: i, seenAt: seenAt) }
                }
            }
            digests.seal()
            return digests
        }
    }

    public func latestSeenAt() async throws -> Millis? {
        try await rows("SELECT max(seen_at) FROM seen_ids", binds(), "read the latest remembered id's time") { row in
            try row.decode(Int64?.self)
        }.first ?? nil
    }

    public func seenId(user: String, id: String) async throws -> SeenId? {
        try await rows("\(Self.selectSeenId) WHERE user_id = $1 AND id = $2", binds(user, id), "read a remembered id", Self.seenId).first
    }

    static let selectSeenId = "SELECT user_id, id, kind, seen_at, status, code, version FROM seen_ids"

    static func seenId(_ row: PostgresRow) throws -> SeenId {
        let (user, id, kind, seenAt, status, code, version) = try row.decode(
            (String, String, String, Int64, String?, String?, Int64?).self)
        var original: Receipt.Original?
        if let status = status.flatMap(Receipt.Status.init(rawValue:)) {
            original = Receipt.Original(status: status, code: code.flatMap(ReceiptCode.init(rawValue:)), version: version)
        }
        return SeenId(userId: user, id: id, kind: try value(kind, column: "seen_ids.kind"), seenAt: seenAt, original: original)
    }

    static let selectMessage = "SELECT conversation, seq, id, sender, text, sent_at, is_read FROM dm_messages"

    static func message(_ row: PostgresRow) throws -> DMMessageRow {
        let (conversation, seq, id, sender, text, sentAt, isRead) = try row.decode(
            (String, Int64, String, String, ByteBuffer, Int64, Bool).self)
        return DMMessageRow(conversation: conversation, seq: seq, id: id, sender: sender,
                            text: String(decoding: text.readableBytesView, as: UTF8.self), sentAt: sentAt, isRead: isRead)
    }

    public func latestMessages(conversation: String, limit: Int) async throws -> [DMMessageRow] {
        try await rows(
            "\(Self.selectMessage) WHERE conversation = $1 ORDER BY seq DESC LIMIT $2", binds(conversation, Int64(limit)),
            "load the latest messages of \(conversation)", Self.message
        ).reversed()
    }

    /// Every conversation with its latest messages in two queries: the rows, then each
    /// conversation's latest messages through a lateral join (an index scan each, one
    /// round trip for all).
    public func loadConversations(messageLimit: Int) async throws -> [StoredConversation] {
        let rows = try await loadEntities(kind: EntityKind.conversation)
        let messages = try await self.rows(
            """
            SELECT m.conversation, m.seq, m.id, m.sender, m.text, m.sent_at, m.is_read
            FROM entities c CROSS JOIN LATERAL (
                SELECT * FROM dm_messages WHERE conversation = c.key ORDER BY seq DESC LIMIT $2) m
            WHERE c.kind = $1
            """, binds(EntityKind.conversation, Int64(messageLimit)), "load the latest messages of every conversation", Self.message)
        var latest: [String: [DMMessageRow]] = [:]
        for message in messages { latest[message.conversation, default: []].append(message) }
        return rows.map { row in
            StoredConversation(row: row, latestMessages: (latest[row.key] ?? []).sorted { $0.seq < $1.seq })
        }
    }

    public func messages(conversation: String, before sentAt: Millis?, limit: Int) async throws -> [DMMessageRow] {
        try await rows(
            "\(Self.selectMessage) WHERE conversation = $1 AND sent_at < $2 ORDER BY sent_at DESC, seq DESC LIMIT $3",
            binds(conversation, sentAt ?? .max, Int64(limit)), "read the history of \(conversation)", Self.message)
    }

    public func logbook(user: String, limit: Int) async throws -> [LogbookRow] {
        try await rows(
            """
            SELECT user_id, workout_id, started_at, ended_at, origin, mode, distance, elapsed_time,
                   average_pace, average_heart_rate, max_heart_rate
            FROM logbook WHERE user_id = $1 ORDER BY started_at DESC, workout_id LIMIT $2
            """, binds(user, Int64(limit)), "read \(user)'s logbook"
        ) { row in
            let (u, w, s, e, o, m, d, t, pace, average, max) = try row.decode(
                (String, String, Int64, Int64, String, String, Double, Double, Double?, Double?, Double?).self)
            return LogbookRow(userId: u, workoutId: w, startedAt: s, endedAt: e, origin: o, mode: m, distance: d,
                              elapsedTime: t, averagePace: pace, averageHeartRate: average, maxHeartRate: max)
        }
    }

    // MARK: Room history

    static let selectHistoryRow = """
        SELECT room_id, version, event_id, user_id, type, sticker_id, at, logged_at, image, x, y, width, height FROM room_history
        """

    static func historyRow(_ row: PostgresRow) throws -> RoomHistoryRow {
        let (roomId, version, eventId, userId, type, stickerId, at, loggedAt, image, x, y, width, height) = try row.decode(
            (String, Int64, String?, String?, String, String?, Int64, Int64, String?, Double?, Double?, Double?, Double?).self)
        var frame: Frame?
        if let x, let y, let width, let height { frame = Frame(x: x, y: y, width: width, height: height) }
        return RoomHistoryRow(
            roomId: roomId, version: version, eventId: eventId, userId: userId, type: try value(type, column: "room_history.type"),
            stickerId: stickerId, timestamp: at, loggedAt: loggedAt, image: image, frame: frame)
    }

    public func roomHistory(room: String, user: String, before: Int64?, limit: Int) async throws -> RoomHistoryPage? {
        // One statement: the membership, the version and the oldest checkpoint agree.
        let head = try await rows(
            """
            SELECT e.version, (SELECT min(version) FROM room_checkpoints WHERE room_id = $1)
            FROM entities e WHERE e.kind = 'room' AND e.key = $1
              AND EXISTS (SELECT 1 FROM room_members WHERE room_id = $1 AND user_id = $2)
            """, binds(room, user), "read the history of room \(room)"
        ) { row in try row.decode((Int64, Int64?).self) }
        guard let (version, oldest) = head.first else { return nil }
        let entries = try await rows(
            "\(Self.selectHistoryRow) WHERE room_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3",
            binds(room, before ?? .max, Int64(limit)), "read the history of room \(room)", Self.historyRow)
        return RoomHistoryPage(version: version, oldestCheckpoint: oldest ?? version, entries: entries)
    }

    public func roomStickers(room: String, at version: Int64) async throws -> [Sticker]? {
        let checkpoints = try await rows(
            "SELECT version, body FROM room_checkpoints WHERE room_id = $1 AND version <= $2 ORDER BY version DESC LIMIT 1",
            binds(room, version), "read room \(room) at version \(version)"
        ) { row in
            let (from, body) = try row.decode((Int64, ByteBuffer).self)
            return (from, Array(body.readableBytesView))
        }
        guard let (from, body) = checkpoints.first else { return nil }
        let history = try await rows(
            "\(Self.selectHistoryRow) WHERE room_id = $1 AND version > $2 AND version <= $3 ORDER BY version",
            binds(room, from, version), "read room \(room) at version \(version)", Self.historyRow)
        guard history.count == version - from else { return nil }
        return RoomHistory.replay(try RoomHistory.stickers(inCheckpoint: body), rows: history)
    }

    public func eventLog(after seq: Int64, limit: Int) async throws -> [EventLogRow] {
        try await rows(
            """
            SELECT seq, at, kind, user_id, target, id, status, code, version, payload
            FROM event_log WHERE seq > $1 ORDER BY seq LIMIT $2
            """, binds(seq, Int64(limit)), "read the event log"
        ) { row in
            let (seq, at, kind, user, target, id, status, code, version, payload) = try row.decode(
                (Int64, Int64, String, String, String, String, String, String?, Int64?, ByteBuffer?).self)
            return EventLogRow(
                seq: seq, at: at, kind: try Self.value(kind, column: "event_log.kind"), userId: user, target: target, id: id,
                status: try Self.value(status, column: "event_log.status"),
                code: try code.map { try Self.value($0, column: "event_log.code") }, version: version,
                payload: payload.map { Array($0.readableBytesView) })
        }
    }

    static func value<T: RawRepresentable<String>>(_ text: String, column: String) throws -> T {
        guard let value = T(rawValue: text) else {
            throw PostgresStoreError(kind: .schema, message: "read \(column): unexpected value \"\(text)\" for \(T.self)")
        }
        return value
    }

    // MARK: Operations

    /// The schema version, the epoch and the singleton rows Tandem needs: "ok", or what is wrong.
    public func integrityCheck() async throws -> String {
        var problems: [String] = []
        let version = try await schemaVersion()
        if version != PostgresSchema.latestVersion {
            problems.append("schema version \(version), expected \(PostgresSchema.latestVersion)")
        }
        let lease = try await rows("SELECT count(*) FROM coordinator_lease", PostgresBindings(), "check the lease row") {
            try $0.decode(Int64.self)
        }
        if lease.first != 1 { problems.append("coordinator_lease has \(lease.first ?? 0) rows, expected 1") }
        let negative = try await rows(
            "SELECT count(*) FROM entities WHERE version < 1", PostgresBindings(), "check entity versions"
        ) { try $0.decode(Int64.self) }
        if let n = negative.first, n > 0 { problems.append("\(n) entities with a version below 1") }
        return problems.isEmpty ? "ok" : problems.joined(separator: "\n")
    }

    func schemaVersion() async throws -> Int32 {
        try await rows("SELECT coalesce(max(version), 0)::int4 FROM tandem_schema", PostgresBindings(), "read the schema version") {
            try $0.decode(Int32.self)
        }.first ?? 0
    }

    public func summary() async throws -> StoreSummary {
        var kinds: [String: Int] = [:]
        for (kind, count) in try await rows(
            "SELECT kind, count(*) FROM entities GROUP BY kind", PostgresBindings(), "count entities",
            { try $0.decode((String, Int64).self) }
        ) { kinds[kind] = Int(count) }
        func count(_ table: String) async throws -> Int {
            Int(try await rows("SELECT count(*) FROM \(table)", PostgresBindings(), "count \(table)") { try $0.decode(Int64.self) }.first ?? 0)
        }
        let size = try await rows("SELECT pg_database_size(current_database())", PostgresBindings(), "read the database size") {
            try $0.decode(Int64.self)
        }.first ?? 0
        return StoreSummary(
            schemaVersion: try await schemaVersion(), epoch: epoch, createdAt: createdAt,
            rooms: kinds[EntityKind.room] ?? 0, conversations: kinds[EntityKind.conversation] ?? 0,
            workouts: kinds[EntityKind.workout] ?? 0, messages: try await count("dm_messages"),
            events: try await count("event_log"), seenIds: try await count("seen_ids"),
            logbookRows: try await count("logbook"), fileBytes: size, walBytes: nil,
            partitions: PartitionsMismatch.reported(try await rows(PartitionsMismatch.recordedSQL, PostgresBindings(), "read the partitions") {
                try $0.decode(String.self)
            }.first))
    }

    public func backup(to path: String) async throws {
        throw PostgresStoreError(kind: .schema, message: "--backup copies a SQLite file; back a PostgreSQL database up with its own tools (pg_dump, or base backups with WAL archiving: docs/OPERATIONS.md)")
    }
}

/// The wall clock in milliseconds since the Unix epoch.
func wallClockMillis() -> Millis {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Millis(ts.tv_sec) * 1000 + Millis(ts.tv_nsec) / 1_000_000
}
