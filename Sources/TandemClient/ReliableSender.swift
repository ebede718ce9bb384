import Logging
import TandemCore

/// Publishes events and commands at least once: each stays pending under its id until
/// its receipt, is resent after ``PendingTracker/resendAfter`` without one, and after
/// every reconnect.
public actor ReliableSender {
    private let transport: any TandemTransport
    private let logger: Logger
    private var tracker: PendingTracker

    public init(transport: any TandemTransport, logger: Logger, resendAfter: Millis = 5_000) {
        self.transport = transport
        self.logger = logger
        tracker = PendingTracker(resendAfter: resendAfter)
    }

    public var pendingCount: Int { tracker.count }
    public var rejectedCount: Int { tracker.rejectedCount }
    public var isSettled: Bool { tracker.isEmpty }

    /// Publishes and keeps it pending. A publish that fails now (not connected) is
    /// resent by the timer or the reconnect.
    public func send(_ outgoing: Outgoing) {
        tracker.sent(outgoing, at: WallClock.now())
        publish(outgoing)
    }

    public func receipt(_ receipt: Receipt) -> PendingTracker.Settlement {
        tracker.receipt(receipt)
    }

    public func resendAll() {
        for outgoing in tracker.resendAll(at: WallClock.now()) { publish(outgoing) }
    }

    public func resendDue() {
        for outgoing in tracker.dueForResend(at: WallClock.now()) {
            logger.info("no receipt for \(outgoing.id) (\(outgoing.label)) yet; resending")
            publish(outgoing)
        }
    }

    /// Waits until nothing is pending or `timeout` passes; returns what was given up.
    public func settle(timeout: Duration) async -> [Outgoing] {
        let deadline = ContinuousClock.now + timeout
        while !tracker.isEmpty, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        return tracker.abandonAll()
    }

    private func publish(_ outgoing: Outgoing) {
        do {
            try transport.enqueue(outgoing.topic, payload: outgoing.payload, retain: false)
        } catch {
            logger.info("publish of \(outgoing.id) failed (\(error)); it is resent later")
        }
    }
}
