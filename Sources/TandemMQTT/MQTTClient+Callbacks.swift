import CMosquitto

/// libmosquitto's callbacks. They run on the loop thread: each copies what it was given
/// and hands it on (continuations, streams); none runs caller code or blocks.
extension ClientCore {
    static func from(_ context: UnsafeMutableRawPointer?) -> ClientCore {
        Unmanaged<ClientCore>.fromOpaque(context!).takeUnretainedValue()
    }

    func installCallbacks() {
        mosquitto_connect_v5_callback_set(mosq) { _, context, reason, flags, _ in
            ClientCore.from(context).didConnect(reason: reason, flags: flags)
        }
        mosquitto_disconnect_v5_callback_set(mosq) { _, context, rc, _ in
            let core = ClientCore.from(context)
            let reason = rc == 0 ? "disconnected by request" : "connection lost: \(LibMosquitto.errorString(rc))"
            _ = core.markDisconnected(reason: reason)
        }
        mosquitto_publish_v5_callback_set(mosq) { _, context, mid, reason, _ in
            ClientCore.from(context).didPublish(mid: mid, reason: reason)
        }
        mosquitto_subscribe_v5_callback_set(mosq) { _, context, mid, count, granted, _ in
            let codes = (0..<Int(count)).map { granted![$0] }
            ClientCore.from(context).didSubscribe(mid: mid, granted: codes)
        }
        // Only ``ClientCore/probe(_:)``, a paused filter and a finished subscription
        // unsubscribe: whichever, the broker answered.
        mosquitto_unsubscribe_v5_callback_set(mosq) { _, context, _, _ in
            ClientCore.from(context).heard()
        }
        mosquitto_message_v5_callback_set(mosq) { _, context, message, _ in
            guard let m = message?.pointee else { return }
            // libmosquitto frees the message when this returns: copy it out now.
            let topic = String(cString: m.topic)
            let payload: [UInt8]
            if m.payloadlen > 0, let base = m.payload {
                payload = Array(UnsafeRawBufferPointer(start: base, count: Int(m.payloadlen)))
            } else {
                payload = []
            }
            let copied = MQTTMessage(topic: topic, payload: payload, qos: m.qos == 0 ? .atMostOnce : .atLeastOnce, retain: m.retain)
            ClientCore.from(context).deliver(copied)
        }
    }

    func didConnect(reason: Int32, flags: Int32) {
        guard reason == 0 else {
            let said = LibMosquitto.reasonString(reason)
            let broker = "the broker at \(configuration.host):\(configuration.port)"
            // 0x86 bad user name or password, 0x87 not authorized, 0x8C bad authentication
            // method: the broker was reached, and it was the account it turned away.
            let message = [0x86, 0x87, 0x8C].contains(reason)
                ? configuration.username.map { "\(broker) refused the credentials of user '\($0)' (\(said)): check the username and password" }
                    ?? "\(broker) refused a connection without credentials (\(said)): give a username and a password"
                : "\(broker) refused the connection: \(said)"
            let error = MQTTError(.connectionRefused(reason: reason), message)
            logger.error("broker refused the connection", error: error)
            if error.isPermanent {
                let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
                    s.permanentFailure = error
                    defer { s.connectWaiters.removeAll() }
                    return Array(s.connectWaiters.values)
                }
                waiters.forEach { $0.resume(throwing: error) }
                _ = mosquitto_disconnect_v5(mosq, 0, nil)
            }
            emit(.disconnected(reason: error.message))
            return
        }
        heard()
        let sessionPresent = flags & 1 == 1
        let ready: Bool = state.withLock { s in
            s.connected = true
            s.sessionPresent = sessionPresent
            flushOutbox(&s)
            // Resend subscriptions on the first connection of this process (so retained
            // messages arrive) and whenever the broker kept no session for us.
            let resubscribe = !s.everConnected || !sessionPresent
            s.everConnected = true
            s.restoringMids.removeAll()
            if resubscribe {
                for entry in s.subscriptions.values {
                    do throws(MQTTError) {
                        let mid = try sendSubscribe(entry.filters, qos: entry.qos)
                        s.restoringMids.insert(mid)
                        s.subscribeAcks[mid] = SubscribeWaiter(filters: entry.filters, continuation: nil)
                    } catch {
                        logger.error("could not restore a subscription", error: error)
                    }
                }
            }
            return s.restoringMids.isEmpty
        }
        logger.debug("connected", metadata: [
            "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)", "mqtt.session_present": "\(sessionPresent)",
        ])
        if ready { becameReady(sessionPresent: sessionPresent) }
    }

    private func becameReady(sessionPresent: Bool) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            defer { s.connectWaiters.removeAll() }
            return Array(s.connectWaiters.values)
        }
        emit(.connected(sessionPresent: sessionPresent))
        waiters.forEach { $0.resume() }
    }

    func didPublish(mid: Int32, reason: Int32) {
        heard()
        let pending = state.withLock { s -> CheckedContinuation<Void, any Error>? in
            guard let p = s.publishes.removeValue(forKey: mid) else { return nil }
            s.publishTokens.removeValue(forKey: p.token)
            return p.continuation
        }
        guard let pending else { return }
        if MQTTError.isFailure(reason: reason) {
            pending.resume(throwing: MQTTError(.refused(reason: reason), "broker refused the publish: \(LibMosquitto.reasonString(reason)) (0x\(String(reason, radix: 16)))"))
        } else {
            pending.resume()
        }
    }

    func didSubscribe(mid: Int32, granted: [Int32]) {
        heard()
        let (waiter, filters, nowReady, sessionPresent) = state.withLock { s -> (SubscribeWaiter?, [String], Bool, Bool) in
            let waiter = s.subscribeAcks.removeValue(forKey: mid)
            let wasRestoring = s.restoringMids.remove(mid) != nil
            return (waiter, waiter?.filters ?? [], wasRestoring && s.restoringMids.isEmpty, s.sessionPresent)
        }
        let refused = zip(filters, granted).filter { MQTTError.isFailure(reason: $0.1) }
        if let waiter = waiter?.continuation {
            if let (filter, code) = refused.first {
                waiter.resume(throwing: MQTTError(.refused(reason: code), "broker refused the subscription to \(filter): \(LibMosquitto.reasonString(code))"))
            } else {
                waiter.resume()
            }
        } else if !refused.isEmpty {
            logger.error("broker refused subscriptions", metadata: ["mqtt.filters": .array(refused.map { .string($0.0) })])
        }
        if nowReady { becameReady(sessionPresent: sessionPresent) }
    }

    /// Hands `message` to every matching subscription, outside the state's lock. Yielding
    /// resumes a task waiting on the stream, which takes that task's status lock; a task
    /// being cancelled holds its status lock while the stream's termination handler takes
    /// this lock (``removeSubscription(_:)``). Yielding under the lock deadlocked the two
    /// (seen once in a full test run: a TestPeer's close hung with a message arriving).
    func deliver(_ message: MQTTMessage) {
        heard()
        let targets = state.withLock { s in s.routes.targets(for: message.topic) }
        for target in targets {
            switch target {
            case .deliver(let deliver): deliver(message)
            case .stream(let continuation): continuation.yield(message)
            }
        }
    }
}
