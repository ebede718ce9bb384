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
public actor PostgresLease {
    public nonisolated let instance: String
    public nonisolated let leaseMs: Int64
    let link: PostgresLink
    let logger: Logger

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

    public init(url: PostgresURL, instance: String, leaseMs: Int64, logger: Logger) {
        self.instance = instance
        self.leaseMs = leaseMs
        self.logger = logger
        let timeout = String(max(100, leaseMs / 2))
        link = PostgresLink(
            url: url, role: "lease \(instance)",
            settings: [("statement_timeout", timeout), ("lock_timeout", timeout)], logger: logger)
    }

    /// Creates the schema (and the lease row) if the database is new, and settles its
    /// number of partitions (recorded at its creation): returns it, or throws
    /// ``PartitionsMismatch`` when `partitions` differs, having written nothing.
    @discardableResult
    public func prepare(partitions: Int, database: String) async throws -> Int {
        try await run("prepare the schema") { connection in
            _ = try await PostgresSchema.migrate(connection, logger: self.logger)
            return try await PostgresSchema.partitions(connection, configured: partitions, database: database, logger: self.logger)
        }.get()
    }

    /// Takes the lease if it has run out or was released: term + 1, this instance,
    /// the database's now plus the lease. nil when another process holds it.
    public func tryAcquire() async throws -> Acquired? {
        try await run("take the lease") { connection in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                UPDATE coordinator_lease AS l
                SET term = l.term + 1, holder = $1, expires_at = clock_timestamp() + $2 * interval '1 millisecond',
                    acquired_at = clock_timestamp(), released = false
                FROM (SELECT term, holder, expires_at, released FROM coordinator_lease WHERE id = 1) AS prev
                WHERE l.id = 1 AND (l.expires_at < clock_timestamp() OR l.released)
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
                UPDATE coordinator_lease SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
                WHERE id = 1 AND term = $1 AND holder = $2 AND NOT released
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
                UPDATE coordinator_lease SET released = true, expires_at = clock_timestamp()
                WHERE id = 1 AND term = $1 AND holder = $2
                """, binds: binds(term, self.instance)), logger: self.logger)
        }
    }

    /// What the row says now.
    public func holder() async throws -> Holder {
        try await run("read the lease") { connection in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: """
                SELECT term, holder, (EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000)::int8, released
                FROM coordinator_lease WHERE id = 1
                """), logger: self.logger)
            for try await (term, holder, expiresIn, released) in rows.decode((Int64, String, Int64, Bool).self) {
                return Holder(term: term, instance: holder, expiresInMs: expiresIn, released: released)
            }
            throw PostgresStoreError(kind: .schema, message: "coordinator_lease has no row: not a Tandem database")
        }
    }

    public func close() async {
        await link.drop()
    }

    @discardableResult
    private func run<T: Sendable>(_ what: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await body(try await link.open())
        } catch {
            let failure = PostgresStoreError(doing: what, error)
            // A fresh connection for the next try, unless the schema itself is wrong.
            if failure.kind != .schema { await link.drop() }
            throw failure
        }
    }
}
