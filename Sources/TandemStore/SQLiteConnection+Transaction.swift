import CSQLite

extension SQLiteConnection {
    /// Runs `body` in one transaction: `BEGIN IMMEDIATE` (the write lock is taken up front,
    /// so a busy database fails here and not halfway through), `COMMIT` when `body` returns,
    /// `ROLLBACK` when it — or the commit — throws, and the error is rethrown.
    ///
    /// Called inside another transaction, it becomes a savepoint: an error undoes only
    /// what the inner body wrote, and the outer transaction decides the rest.
    public func transaction<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        if isInTransaction {
            try execute("SAVEPOINT tandem_nested")
            do {
                let result = try body(self)
                try execute("RELEASE tandem_nested")
                return result
            } catch {
                try? execute("ROLLBACK TO tandem_nested")
                try? execute("RELEASE tandem_nested")
                throw error
            }
        }
        // Cached statements, not sqlite3_exec: a transaction a turn would parse both
        // every time.
        _ = try run("BEGIN IMMEDIATE")
        do {
            let result = try body(self)
            _ = try run("COMMIT")
            return result
        } catch {
            // A failed COMMIT may leave the transaction open (SQLITE_BUSY); after some
            // errors SQLite has already rolled back, and then ROLLBACK has nothing to do.
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
    }
}
