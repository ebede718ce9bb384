import Synchronization
import Testing
@testable import TandemPostgres

/// How long a PostgreSQL statement is waited for (`PostgresStore.racing`): a commit's
/// attempt, and every statement of the lease. No server: the body stands in for a
/// statement whose answer comes, or never does.
@Suite struct PostgresRacingTests {
    @Test(.timeLimit(.minutes(1)))
    func anAnswerInTimeIsTheResult() async throws {
        let timedOut = Atomic(false)
        let value = try await PostgresStore.racing(deadline: .seconds(5), onTimeout: { timedOut.store(true, ordering: .relaxed) }) { 42 }
        let ran = timedOut.load(ordering: .relaxed)
        #expect(value == 42)
        #expect(!ran)
    }

    // No bound on the time taken (the test run's pool may be busy for seconds): the
    // body never answers, so returning at all is what shows the wait was given up.

    @Test(.timeLimit(.minutes(1)))
    func noAnswerByTheDeadlineIsGivenUpOn() async throws {
        let timedOut = Atomic(false)
        await #expect(throws: PostgresStore.AttemptTimedOut.self) {
            try await PostgresStore.racing(deadline: .milliseconds(200), onTimeout: { timedOut.store(true, ordering: .relaxed) }) {
                try await Task.sleep(for: .seconds(3600))
                return 0
            }
        }
        // onTimeout runs after the waiter is answered (it closes the connection).
        for _ in 0..<100 where !timedOut.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(10)) }
        let ran = timedOut.load(ordering: .relaxed)
        #expect(ran)
    }

    /// A lease that runs out ends the wait at once, not at the attempt's limit: a leader
    /// cut from the database stands by within the lease.
    @Test(.timeLimit(.minutes(1)))
    func aWaitIsGivenUpOnAsSoonAsItIsNoLongerWanted() async throws {
        let wanted = Atomic(true)
        let racing = Task {
            try await PostgresStore.racing(deadline: .seconds(3600), giveUpWhen: { !wanted.load(ordering: .relaxed) }, onTimeout: {}) {
                try await Task.sleep(for: .seconds(3600))
                return 0
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        wanted.store(false, ordering: .relaxed)
        await #expect(throws: PostgresStore.AttemptTimedOut.self) { try await racing.value }
    }
}
