import Logging
import PostgresNIO
import TandemStore
import TandemCore

/// The leader lease: one row in `coordinator_lease` saying which coordinator process
/// leads, under which term, until when. Time is the database's own clock
/// (`clock_timestamp()`), so the processes' clocks never have to agree.
///
/// - A process becomes leader only by taking an expired (or released) lease, which
///   raises the term by one.
/// - The leader renews well inside the lease; each renewal moves `expires_at` to the
///   database's now plus the lease.
/// - Every commit of the leader's store checks its term in the same transaction
///   (`PostgresStore.LeaderFence`), so a deposed leader cannot write.
///
/// The lease has a connection of its own, so that a slow commit never delays a renewal.
/// Its statements give up after half the lease (`statement_timeout`, `lock_timeout`).
///
/// With more than one partition on a database shared between processes, each partition
/// has a row of its own in `partition_lease`, with the same rules and its own term
/// (``Row/partition(_:)``); the one-leader row is `coordinator_lease` (``Row/leader``).
public actor PostgresLease {
    public nonisolated let instance: String
    public nonisolated let leaseMs: Int64
    public nonisolated let row: Row
    let link: PostgresLink
    let logger: Logger

    /// Which lease row: the one leader's, or a partition's.
    public enum Row: Sendable, Equatable, CustomStringConvertible {
        case leader
        case partition(Int)

        var table: String {
            switch self {
            case .leader: "coordinator_lease"
            case .partition: "partition_lease"
            }
        }

        /// The row's key, as SQL (a number this process chose, never input).
        var key: String {
            switch self {
            case .leader: "id = 1"
            case .partition(let k): "partition = \(k)"
            }
        }

        public var description: String {
            switch self {
            case .leader: "the leader lease"
            case .partition(let k): "the lease of partition \(k)"
            }
        }
    }

    /// What the lease row says.
    public struct Holder: Sendable, Equatable {
        public var term: Int64
        public var instance: String
        /// Milliseconds until it runs out by the database's clock (negative: ran out).
        public var expiresInMs: Int64
        /// Its holder gave it up on a clean shutdown.
        public var released: Bool
    }

    /// A lease this process just took, and what the row said before.
    public struct Acquired: Sendable {
        public var term: Int64
        public var previous: Holder
    }

    public init(url: PostgresURL, instance: String, leaseMs: Int64, row: Row = .leader, logger: Logger) {
        self.instance = instance
        self.leaseMs = leaseMs
        self.row = row
        self.logger = logger
        let timeout = String(max(100, leaseMs / 2))
        link = PostgresLink(
            url: url, role: row == .leader ? "lease \(instance)" : "lease \(instance) \(row)",
            settings: [("statement_timeout", timeout), ("lock_timeout", timeout)], logger: logger)
    }

    /// Creates the schema (and the lease row) if the database is new, and settles its
    /// number of partitions (recorded at its creation): returns it, or throws
    /// ``PartitionsMismatch`` when `partitions` differs, having written nothing.
    @discardableResult
    public func prepare(partitions: Int, database: String) async throws -> Int {
        try await run("prepare the schema", bounded: false) { connection in
            _ = try await PostgresSchema.migrate(connection, logger: self.logger)
            return try await PostgresSchema.partitions(connection, configured: partitions, database: database, logger: self.logger)
        }.get()
    }

    /// Takes the lease if it has run out or was released: term + 1, this instance,
    /// the database's now plus the lease. nil when another process holds it.
    public func tryAcquire() async throws -> Acquired? {
        try await run("take the lease") { connection in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                UPDATE \(self.row.table) AS l
                SET term = l.term + 1, holder = $1, expires_at = clock_timestamp() + $2 * interval '1 millisecond',
                    acquired_at = clock_timestamp(), released = false\(self.row == .leader ? "" : ", ready = false")
                FROM (SELECT term, holder, expires_at, released FROM \(self.row.table) WHERE \(self.row.key)) AS prev
                WHERE l.\(self.row.key) AND (l.expires_at < clock_timestamp() OR l.released)
                RETURNING l.term, prev.term, prev.holder,
                          (EXTRACT(EPOCH FROM (prev.expires_at - clock_timestamp())) * 1000)::int8, prev.released
                """, binds: binds(self.instance, self.leaseMs)), logger: self.logger)
            for try await (term, previousTerm, previousHolder, expiresIn, released) in rows.decode((Int64, Int64, String, Int64, Bool).self) {
                return Acquired(term: term, previous: Holder(term: previousTerm, instance: previousHolder, expiresInMs: expiresIn, released: released))
            }
            return nil
        }
    }

    /// Extends the lease held under `term`. False when the row names another term or
    /// holder (someone took over): the caller has lost leadership.
    public func renew(term: Int64) async throws -> Bool {
        try await run("renew the lease") { connection in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                UPDATE \(self.row.table) SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
                WHERE \(self.row.key) AND term = $1 AND holder = $2 AND NOT released
                RETURNING term
                """, binds: binds(term, self.instance, self.leaseMs)), logger: self.logger)
            for try await _ in rows { return true }
            return false
        }
    }

    /// Gives the lease up (a clean shutdown), so that a standby takes over at its next
    /// look instead of waiting the lease out.
    public func release(term: Int64) async throws {
        try await run("release the lease") { connection in
            try await connection.query(PostgresQuery(unsafeSQL: """
                UPDATE \(self.row.table) SET released = true, expires_at = clock_timestamp()
                WHERE \(self.row.key) AND term = $1 AND holder = $2
                """, binds: binds(term, self.instance)), logger: self.logger)
        }
    }

    /// What the row says now.
    public func holder() async throws -> Holder {
        try await run("read the lease") { connection in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                SELECT term, holder, (EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000)::int8, released
                FROM \(self.row.table) WHERE \(self.row.key)
                """), logger: self.logger)
            for try await (term, holder, expiresIn, released) in rows.decode((Int64, String, Int64, Bool).self) {
                return Holder(term: term, instance: holder, expiresInMs: expiresIn, released: released)
            }
            throw PostgresStoreError(kind: .schema, message: "\(self.row.table) has no row for \(self.row): not a Tandem database, or not one with partitions")
        }
    }

    public func close() async {
        await link.drop()
    }

    // MARK: Partitions shared between processes

    /// Marks the partition's lease of `term` ready (its leader's session is subscribed).
    /// Returns whether every partition now has a ready leader whose lease runs, and the
    /// sum of the partitions' terms (it grows with every move: the status's `term`).
    public func markReady(term: Int64) async throws -> (all: Bool, termSum: Int64) {
        try await run("mark \(row) ready") { connection in
            try await connection.query(PostgresQuery(unsafeSQL: """
                UPDATE partition_lease SET ready = true WHERE \(self.row.key) AND term = $1 AND holder = $2
                """, binds: binds(term, self.instance)), logger: self.logger)
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                SELECT bool_and(ready AND NOT released AND expires_at > clock_timestamp()), sum(term)::int8 FROM partition_lease
                """), logger: self.logger)
            for try await (all, sum) in rows.decode((Bool?, Int64?).self) { return (all ?? false, sum ?? 0) }
            return (false, 0)
        }
    }

    /// Says this process is alive for another lease (`coordinator_process`), forgets
    /// processes gone for ten leases, and returns how many are alive, this one included.
    public func heartbeat() async throws -> Int {
        try await run("say this process is alive") { connection in
            try await connection.query(PostgresQuery(unsafeSQL: """
                INSERT INTO coordinator_process(instance, expires_at) VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond')
                ON CONFLICT (instance) DO UPDATE SET expires_at = excluded.expires_at
                """, binds: binds(self.instance, self.leaseMs)), logger: self.logger)
            try await connection.query(PostgresQuery(unsafeSQL: """
                DELETE FROM coordinator_process WHERE expires_at < clock_timestamp() - 10 * $1 * interval '1 millisecond'
                """, binds: binds(self.leaseMs)), logger: self.logger)
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                SELECT count(*) FROM coordinator_process WHERE expires_at > clock_timestamp() OR instance = $1
                """, binds: binds(self.instance)), logger: self.logger)
            for try await count in rows.decode(Int64.self) { return Int(count) }
            return 1
        }
    }

    /// This process leaves (a clean shutdown): the others' shares grow at their next look.
    /// Returns how many others are still alive.
    public func leave() async throws -> Int {
        try await run("say this process leaves") { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "DELETE FROM coordinator_process WHERE instance = $1",
                                                     binds: binds(self.instance)), logger: self.logger)
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                SELECT count(*) FROM coordinator_process WHERE expires_at > clock_timestamp()
                """), logger: self.logger)
            for try await count in rows.decode(Int64.self) { return Int(count) }
            return 0
        }
    }

    /// Every partition's lease row: who holds it under which term, and whether it is free
    /// to take (ran out or released).
    public func partitionHolders() async throws -> [(partition: Int, holder: Holder)] {
        try await run("read the partitions' leases") { connection in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                SELECT partition, term, holder, (EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000)::int8, released
                FROM partition_lease ORDER BY partition
                """), logger: self.logger)
            var out: [(Int, Holder)] = []
            for try await (partition, term, holder, expiresIn, released) in rows.decode((Int32, Int64, String, Int64, Bool).self) {
                out.append((Int(partition), Holder(term: term, instance: holder, expiresInMs: expiresIn, released: released)))
            }
            return out
        }
    }

    @discardableResult
    /// Runs `body` on the lease's connection. Unless `bounded` is false (a migration may
    /// wait for another's lock), no answer is waited for longer than ``answerLimit``: the
    /// server's own timeouts cannot end a wait whose answer never arrives (a host cut
    /// from the database: a renewal in flight on it would otherwise hold the term open
    /// until TCP gives up, minutes later, and the process could not stand by). The
    /// connection is then closed, and the next call makes a new one.
    private func run<T: Sendable>(
        _ what: String, bounded: Bool = true, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            let connection = try await link.open()
            guard bounded else { return try await body(connection) }
            return try await PostgresStore.racing(deadline: answerLimit, onTimeout: { try? await connection.close() }) {
                try await body(connection)
            }
        } catch {
            let failure = error is PostgresStore.AttemptTimedOut
                ? PostgresStoreError(kind: .connection, message: "\(what): no answer within \(answerLimit)")
                : PostgresStoreError(doing: what, error)
            // A fresh connection for the next try, unless the schema itself is wrong.
            if failure.kind != .schema { await link.drop() }
            throw failure
        }
    }

    /// The longest a lease statement waits for its answer: the server's own timeout (half
    /// the lease) and a second more for the way there and back.
    public nonisolated var answerLimit: Duration { .milliseconds(max(100, leaseMs / 2) + 1000) }
}
