import Testing

/// `@Suite(.postgres)`: one real PostgreSQL server for the whole suite, started before
/// its first test and stopped (by PID) after its last; tests reach it through
/// ``PostgresServer/current`` and make a database of their own on it.
public struct PostgresSuiteTrait: SuiteTrait, TestScoping {
    public var isRecursive: Bool { false }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withPostgres { server in
            try await PostgresServer.$current.withValue(server) {
                try await function()
            }
        }
    }
}

extension Trait where Self == PostgresSuiteTrait {
    /// One PostgreSQL server for the suite (see ``PostgresSuiteTrait``).
    public static var postgres: Self { PostgresSuiteTrait() }
}

extension PostgresServer {
    /// The suite's server, inside a suite marked `.postgres`.
    @TaskLocal public static var current: PostgresServer?

    /// The suite's server; fails the test outside a `.postgres` suite.
    public static func suiteServer() throws -> PostgresServer {
        guard let server = current else { throw PostgresServerError.command("PostgresServer.current", "the suite is not marked .postgres") }
        return server
    }

    /// A new, empty database on this server; returns its URL.
    public func freshDatabase() async throws -> String {
        let name = "t\(UInt64.random(in: 0...UInt64.max))"
        try await createDatabase(name)
        return url(database: name)
    }
}
