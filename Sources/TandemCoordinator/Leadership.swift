import Logging
import Synchronization
import TandemCore
import TandemEngine
#if PostgreSQL
import TandemPostgres
#endif

/// This process's own view of the leader lease it holds: a deadline on the monotonic
/// clock, after which it must act as if it had lost the lease, whatever the database
/// says or whether it can be reached.
///
/// The deadline is the moment a successful renewal was *sent* plus the lease minus a
/// margin. The database computes its expiry from its own clock when it runs the
/// statement, which is later than the send, so this process always gives up before the
/// database lets a standby take over. A process frozen by SIGSTOP (or starved of CPU)
/// finds its deadline passed when it runs again: the MQTT gate closes before anything
/// more is handed to the broker, the commit retry stops, and the pipeline ends.
///
/// Once lost, a fence never holds again (a late renewal does not revive it): the term
/// is over, and the process competes for a new one as a standby.
final class LeaseFence: Sendable {
    let term: Int64
    let leaseMs: Int64
    /// How long before the lease's end this process stops (a fifth of the lease).
    let marginMs: Int64
    private let state: Mutex<State>

    struct State {
        var deadline: ContinuousClock.Instant
        /// When the renewal that set `deadline` was sent (at first, the acquisition).
        var sentAt: ContinuousClock.Instant
        var lost: LeaseLoss?
        var notified = false
        var handlers: [@Sendable (LeaseLoss) -> Void] = []
        var renewalHandlers: [@Sendable () -> Void] = []
    }

    init(term: Int64, leaseMs: Int64, acquireSentAt: ContinuousClock.Instant) {
        self.term = term
        self.leaseMs = leaseMs
        let marginMs = max(100, leaseMs / 5)
        self.marginMs = marginMs
        state = Mutex(State(deadline: acquireSentAt + .milliseconds(leaseMs - marginMs), sentAt: acquireSentAt))
    }

    /// Whether the lease is still this process's to use. Safe from any thread (the MQTT
    /// loop thread asks it); it only reads the clock and a lock. The first call that
    /// finds the deadline passed marks the fence lost.
    var holds: Bool {
        state.withLock { s in
            if s.lost != nil { return false }
            let now = ContinuousClock.now
            guard now < s.deadline else {
                s.lost = .deadlinePassed(byMs: (now - s.deadline).roundedMillis)
                return false
            }
            return true
        }
    }

    var deadline: ContinuousClock.Instant { state.withLock { $0.deadline } }
    /// The last renewal that moved the deadline: when it was sent, and the deadline.
    var renewal: (sentAt: ContinuousClock.Instant, deadline: ContinuousClock.Instant) {
        state.withLock { ($0.sentAt, $0.deadline) }
    }
    var lostReason: LeaseLoss? { state.withLock { $0.lost } }

    /// A renewal sent at `sentAt` succeeded: the deadline moves, unless the fence was
    /// already lost.
    func renewed(sentAt: ContinuousClock.Instant) {
        let handlers = state.withLock { s -> [@Sendable () -> Void] in
            guard s.lost == nil, ContinuousClock.now < s.deadline else { return [] }
            let next = sentAt + .milliseconds(leaseMs - marginMs)
            guard next > s.deadline else { return [] }
            s.deadline = next
            s.sentAt = sentAt
            return s.renewalHandlers
        }
        handlers.forEach { $0() }
    }

    /// Runs `handler` after every renewal that moved the deadline: a pipeline with no
    /// input for longer than the lease must still hear of each renewal before its own
    /// view of the deadline passes (it only accepts a renewal sent before that).
    func whenRenewed(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.renewalHandlers.append(handler) }
    }

    /// Marks the lease lost (the first reason stays) and tells every handler, once.
    /// Called from tasks, never from the MQTT thread (handlers take the client's lock).
    func lose(_ reason: LeaseLoss) {
        let (why, handlers) = state.withLock { s -> (LeaseLoss, [@Sendable (LeaseLoss) -> Void]) in
            if s.lost == nil { s.lost = reason }
            guard !s.notified else { return (s.lost!, []) }
            s.notified = true
            defer { s.handlers.removeAll() }
            return (s.lost!, s.handlers)
        }
        handlers.forEach { $0(why) }
    }

    /// Runs `handler` when the lease is lost (at once if it already was and was told).
    func whenLost(_ handler: @escaping @Sendable (LeaseLoss) -> Void) {
        let already = state.withLock { s -> LeaseLoss? in
            guard s.notified else {
                s.handlers.append(handler)
                return nil
            }
            return s.lost
        }
        if let already { handler(already) }
    }

    #if PostgreSQL
    /// Renews the lease every `renewEvery` and watches the deadline, until the term
    /// ends (the caller cancels) or the lease is lost (then ``lose(_:)`` has run).
    func keep(with lease: PostgresLease, renewEvery: Duration, logger: Logger) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                var failing = false
                while !Task.isCancelled, holds {
                    try? await Task.sleep(for: renewEvery)
                    guard !Task.isCancelled, holds else { break }
                    let sent = ContinuousClock.now
                    do {
                        if try await lease.renew(term: term) {
                            renewed(sentAt: sent)
                            if failing { logger.notice("leader lease of term \(term) renewed again") }
                            failing = false
                        } else {
                            let now = try? await lease.holder()
                            lose(.takenOver(term: now?.term, instance: now?.instance))
                        }
                    } catch {
                        let left = (deadline - ContinuousClock.now).roundedMillis
                        logger.warning("could not renew the leader lease of term \(term): \(error); \(left > 0 ? "this process gives it up in \(left) ms unless a renewal succeeds" : "its deadline has passed")")
                        failing = true
                    }
                }
            }
            group.addTask { [self] in
                while !Task.isCancelled {
                    if !holds {
                        lose(lostReason ?? .deadlinePassed(byMs: 0))
                        return
                    }
                    try? await Task.sleep(until: deadline, clock: .continuous)
                }
            }
            // The first to end means the lease is lost (or the term was cancelled).
            await group.next()
            group.cancelAll()
        }
        // Whichever ended first, a lease that does not hold is lost: tell the term (the
        // renewer may have seen it first and ended, cancelling the watchdog before it said so).
        if !holds { lose(lostReason ?? .deadlinePassed(byMs: 0)) }
    }
    #endif
}

extension Duration {
    var roundedMillis: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}

#if PostgreSQL
/// A standby's wait for the lease: it tries to take it every `poll` while it hears the
/// broker (`link`: a leader nobody can reach is no leader) and says who leads whenever
/// that changes. Throws `CancellationError` when cancelled (a shutdown), and any error
/// that retrying cannot fix (a refused password, a database that does not exist); a
/// database that cannot be reached is waited for.
func waitForLease(
    _ lease: PostgresLease, link: BrokerLink, poll: Duration, logger: Logger
) async throws -> (acquired: PostgresLease.Acquired, sentAt: ContinuousClock.Instant) {
    var lastSeen: PostgresLease.Holder?
    var unreachable = false
    // How the link looked when it stopped letting this process lead (nil: it lets it).
    var lostWith: BrokerLink.Reading?
    while true {
        try Task.checkCancellation()
        guard link.mayLead else {
            if lostWith == nil {
                let reading = link.reading
                lostWith = reading
                // At a start the instance connection is still being made: no warning.
                if reading.quiet == nil {
                    logger.info("standby: waiting for the broker before taking the lease")
                } else {
                    logger.warning("standby: not taking the lease while the broker cannot be heard (\(reading)); looking again every \(poll)")
                }
            }
            try await Task.sleep(for: poll)
            continue
        }
        if let lost = lostWith, lost.quiet != nil { logger.notice("standby: the broker answers again (\(link.reading)); ready to lead") }
        lostWith = nil
        let sent = ContinuousClock.now
        do {
            if let acquired = try await lease.tryAcquire() { return (acquired, sent) }
            let holder = try await lease.holder()
            if holder.term != lastSeen?.term || holder.instance != lastSeen?.instance || unreachable {
                logger.info("standby: instance \(holder.instance) leads (term \(holder.term)); its lease runs out in \(Double(holder.expiresInMs) / 1000) s unless renewed")
            }
            lastSeen = holder
            unreachable = false
        } catch let error as PostgresStoreError where error.isConnectionLoss {
            if !unreachable { logger.warning("standby: cannot reach the database: \(error); trying again every \(poll)") }
            unreachable = true
        }
        try await Task.sleep(for: poll)
    }
}
#endif
