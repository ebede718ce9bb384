import Synchronization
import Testing
@testable import TandemPostgres

/// How long a PostgreSQL statement is waited for (`PostgresStore.racing`): a commit's
/// attempt, and every statement of the lease. No server: the body stands in for a
/// statement whose answer comes, or never does.
@Suite struct PostgresRacingTests {
    @Test func anAnswerInTimeIsTheResult() async throws {
        let timedOut = Atomic(false)
        let value = try await PostgresStore.racing(deadline: .seconds(5), onTimeout: { timedOut.store(true, ordering: .relaxed) }) { 42 }
        let ran = timedOut.load(ordering: .relaxed)
        #expect(value == 42)
        #expect(!ran)
    }

    @Test func noAnswerByTheDeadlineIsGivenUpOn() async throws {
        let timedOut = Atomic(false)
        let started = ContinuousClock.now
        await #expect(throws: PostgresStore.AttemptTimedOut.self) {
            try await PostgresStore.racing(deadline: .milliseconds(200), onTimeout: { timedOut.store(true, ordering: .relaxed) }) {
                try await Task.sleep(for: .seconds(60))
                return 0
            }
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        // onTimeout runs after the waiter is answered (it closes the connection).
        for _ in 0..<100 where !timedOut.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(10)) }
        let ran = timedOut.load(ordering: .relaxed)
        #expect(ran)
    }

    /// A lease that runs out ends the wait at once, not at the attempt's limit: a leader
    /// cut from the database stands by within the lease.
    @Test func aWaitIsGivenUpOnAsSoonAsItIsNoLongerWanted() async throws {
        let wanted = Atomic(true)
        let started = ContinuousClock.now
        let racing = Task {
            try await PostgresStore.racing(deadline: .seconds(30), giveUpWhen: { !wanted.load(ordering: .relaxed) }, onTimeout: {}) {
                try await Task.sleep(for: .seconds(60))
                return 0
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        wanted.store(false, ordering: .relaxed)
        await #expect(throws: PostgresStore.AttemptTimedOut.self) { try await racing.value }
        #expect(ContinuousClock.now - started < .seconds(5))
    }
}
