import CMosquitto
import Foundation

/// A client connected by an ``MQTTConnector``: what ``ClientCore/runLoop()`` does on a
/// thread of its own, as steps that the connector's threads run one at a time for this
/// client (a connect, a hand-back from the loop, a reconnect due), so that no thread
/// waits for this client between them. A client is in one place at a time: a step
/// queued or running on the connector, a reconnect waiting in its timers, or its socket
/// attached to the loop.
extension ClientCore {
    struct Pooled {
        var delay: Double = 0
        var socketOpen = false
        var closedUnanswered = 0
        /// A reconnect waits in the connector's timers; `generation` names the latest, so
        /// that one run early (shutdown, cut off) is not run again when its timer fires.
        var retryPending = false
        var generation: UInt64 = 0
        /// ``ClientCore/shutdown()`` callers waiting for the last step.
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// The top of ``runLoop()``'s loop: stop, fence, or connect and hand the socket to
    /// the loop.
    func pooledStep() {
        let (phase, cut, socketOpen) = state.withLock { s in
            if s.pooled.delay == 0 { s.pooled.delay = configuration.reconnectDelay }
            return (s.phase, closedReason(&s), s.pooled.socketOpen)
        }
        if phase != .running { return pooledFinish() }
        if let cut {
            fence(reason: cut)
            return pooledFinish()
        }
        if !socketOpen {
            let rc = connectOnce()
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                // This attempt got through to the port: what an earlier one met (refused,
                // unreachable) is no longer why we are not connected.
                state.withLock { s in
                    s.pooled.socketOpen = true
                    s.lastProblem = nil
                }
            } else if rc == MOSQ_ERR_TLS.rawValue, failTLSForGood() {
                return pooledFinish()
            } else {
                let reason = "connect to \(configuration.host):\(configuration.port) failed: \(LibMosquitto.errorString(rc)) (errno \(errno): \(String(cString: strerror(errno))))"
                state.withLock { $0.lastProblem = reason }
                logger.info("cannot connect; retrying", metadata: ["reason": "\(reason)"])
                emit(.disconnected(reason: reason))
                return pooledRetry()
            }
        }
        // The loop drives the socket until a read or write fails, the gate closes or we
        // stop; then ``loopFailed(_:)`` queues ``pooledHandedBack(_:)``.
        loop!.attach(self)
    }

    /// The loop let go of the socket with `rc`: what ``runLoop()`` does after
    /// `handedBack.wait()`.
    func pooledHandedBack(_ rc: Int32) {
        // Handed back to stop, cut off or for the gate: the checks of a step decide.
        if rc == MOSQ_ERR_SUCCESS.rawValue { return pooledStep() }
        state.withLock { $0.pooled.socketOpen = false }
        if rc == MOSQ_ERR_TLS.rawValue, failTLSForGood() { return pooledFinish() }
        let answered = state.withLock { $0.connected }
        let closedUnanswered = state.withLock { s in
            s.pooled.closedUnanswered = answered ? 0 : s.pooled.closedUnanswered + 1
            return s.pooled.closedUnanswered
        }
        let wasConnected = markDisconnected(reason: answered ? "connection lost: \(LibMosquitto.errorString(rc))" : notMQTTReason)
        if closedUnanswered >= 3, failNotMQTTForGood() { return pooledFinish() }
        let (phase, permanent) = state.withLock { s in
            if wasConnected { s.pooled.delay = configuration.reconnectDelay }
            return (s.phase, s.permanentFailure)
        }
        if phase != .running || permanent != nil { return pooledFinish() }
        logger.info("connection lost; reconnecting", metadata: [
            "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)", "reason": "\(LibMosquitto.errorString(rc))",
        ])
        pooledRetry()
    }

    /// Waits the backoff in the connector's timers, then steps again.
    private func pooledRetry() {
        let (generation, delay) = state.withLock { s in
            s.pooled.generation += 1
            s.pooled.retryPending = true
            let delay = s.pooled.delay
            s.pooled.delay = min(delay * 2, configuration.reconnectDelayMax)
            return (s.pooled.generation, delay)
        }
        connector!.schedule(after: delay) { [self] in pooledRetryDue(generation) }
    }

    private func pooledRetryDue(_ generation: UInt64) {
        let due = state.withLock { s -> Bool in
            guard s.pooled.retryPending, s.pooled.generation == generation else { return false }
            s.pooled.retryPending = false
            return true
        }
        if due { pooledStep() }
    }

    /// What `wake.signal()` does for a thread in its backoff: a reconnect that waits is
    /// run now (to stop, or to be fenced). Nothing for a client without a connector.
    func pooledWake() {
        guard let connector else { return }
        let waiting = state.withLock { s -> UInt64? in s.pooled.retryPending ? s.pooled.generation : nil }
        if let generation = waiting {
            connector.submit { [self] in pooledRetryDue(generation) }
        }
    }

    /// The end of ``runLoop()``: a DISCONNECT still queued is flushed (never once cut
    /// off), everything waiting is failed, and whoever waits for the stop is told.
    private func pooledFinish() {
        let flush = state.withLock { $0.pooled.socketOpen && $0.cutReason == nil }
        if flush {
            // The loop wrote the DISCONNECT before letting go, as a rule: this only
            // finishes one that had not left (libmosquitto then closes the socket).
            for _ in 0..<20 where loopOnce(timeout: 5) == MOSQ_ERR_SUCCESS.rawValue {}
        }
        _ = markDisconnected(reason: "client shut down")
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.phase = .stopped
            s.pooled.socketOpen = false
            defer { s.pooled.stopWaiters.removeAll() }
            return s.pooled.stopWaiters
        }
        loopFinished.signal()
        waiters.forEach { $0.resume() }
    }
}
