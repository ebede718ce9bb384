import CMosquitto
import CMosquittoReads
import Foundation
import Logging
import Synchronization

/// An MQTT v5 client over libmosquitto, for async/await.
///
/// libmosquitto connects and reconnects (with a capped backoff) on a thread of this
/// client's own (``ClientCore/runLoop()``). Once connected, the socket is read and
/// written either on that thread, which waits in `poll(2)`
/// (``ClientCore/loopOnce(timeout:)``), or, for a client made with a ``PollLoop``, on the
/// loop's thread beside whatever else runs there (the coordinator's pipeline). Never in
/// `mosquitto_loop()`, whose `select(2)` refuses any socket numbered 1,024 or more: a
/// process with many connections (tandem-web holds one per signed-in person) would
/// otherwise stop at about 250 of them. libmosquitto's callbacks run on the thread that
/// reads; they copy what they receive and hand it over through continuations and
/// `AsyncStream`s, and the only caller code they run is a subscription's `deliver`
/// closure and the ``MQTTClient/onEvent(_:)`` handlers, which must return at once.
///
/// - Publishing QoS 1 with ``publish(_:payload:qos:retain:)`` returns when the broker's
///   PUBACK arrives and throws on a negative reason code, on disconnect and on
///   cancellation. ``enqueue(_:payload:qos:retain:)`` hands the message to libmosquitto
///   and returns; QoS 1 messages survive an outage in an outbox and leave first on reconnect.
/// - ``subscribe(_:qos:)`` gives an `AsyncSequence` of messages; with a clean-start
///   session it unsubscribes when the consumer stops. A persistent session keeps its
///   subscriptions at the broker (only the local stream ends), so messages published
///   while the process is gone are queued for its next run. Subscriptions made before ``connect()`` are sent with the
///   first CONNECT, so nothing the broker has queued for a persistent session is
///   delivered before anyone listens.
public final class MQTTClient: Sendable {
    let core: ClientCore
    public let configuration: MQTTConfiguration

    /// Connection events (connected, disconnected with the reason), newest kept.
    public var events: AsyncStream<MQTTConnectionEvent> { core.events }

    /// Hands every connection event from now on to `handler` as well, on the thread that
    /// sees it (the loop's, the connector's or the client's own): for a consumer that
    /// merges them into an input of its own, with no task waiting on ``events``.
    /// `handler` must return at once and never call into this client. Each call adds one.
    public func onEvent(_ handler: @escaping @Sendable (MQTTConnectionEvent) -> Void) {
        core.eventHandlers.withLock { $0.append(handler) }
    }

    /// `loop`: the ``PollLoop`` that drives this session's socket once it is connected
    /// (its callbacks and `deliver` run on that loop's thread, with whatever else runs
    /// there); nil: a thread of the client's own polls it. `connector` (with a `loop`
    /// only): the ``MQTTConnector`` whose threads connect and reconnect this client, so
    /// that it has no thread of its own; nil: connecting and reconnecting are on the
    /// client's own thread.
    public init(
        configuration: MQTTConfiguration, loop: PollLoop? = nil, connector: MQTTConnector? = nil, logger: Logger = Logger(label: "tandem.mqtt")
    ) throws(MQTTError) {
        self.configuration = configuration
        self.core = try ClientCore(configuration: configuration, loop: loop, connector: loop == nil ? nil : connector, logger: logger)
    }

    deinit {
        core.stopLoop()
    }

    /// Connects and waits until the broker accepted us and every subscription made so
    /// far is acknowledged. Network failures are retried with backoff while this waits;
    /// a refusal that retrying cannot fix (bad credentials) throws.
    public func connect() async throws {
        try await core.connect()
    }

    /// The descriptors a connected client holds: its socket, and libmosquitto's wake-up
    /// pair where it could not be closed (a libmosquitto other than 2.0). With a
    /// ``PollLoop`` and ``MQTTConnector`` that is all; alone it adds an eventfd.
    public static var descriptorsPerConnection: Int { LibMosquitto.closesWakePair ? 1 : 3 }

    /// Whether the connection is up at this moment.
    public var isConnected: Bool { core.isConnected }

    /// Why the last connection attempt failed or the connection dropped ("connect to
    /// H:P failed: Connection refused ..."); nil before any problem, and while an
    /// attempt that reached the port waits for the broker's answer.
    public var lastProblem: String? { core.state.withLock { $0.lastProblem } }

    /// Publishes and, for QoS 1, waits for the broker's PUBACK.
    /// `messageExpirySeconds`: the broker drops the message (a retained copy included)
    /// that long after it arrives.
    public func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false, messageExpirySeconds: UInt32? = nil
    ) async throws {
        try await core.publish(topic, payload: payload, qos: qos, retain: retain, messageExpirySeconds: messageExpirySeconds)
    }

    /// Hands the message over and returns at once. QoS 1 messages enqueued without a
    /// connection wait in an outbox (up to 100,000) and leave first, in order, when the
    /// connection is back; libmosquitto retries those in flight across reconnects of
    /// this process. QoS 0 without a connection throws.
    public func enqueue(_ topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false) throws(MQTTError) {
        try core.enqueue(topic, payload: payload, qos: qos, retain: retain)
    }

    /// Subscribes to topic filters. Connected: waits for the SUBACK and throws if the
    /// broker refused a filter. Not yet connected: registers them for the next CONNECT.
    public func subscribe(_ filters: [String], qos: MQTTQoS = .atLeastOnce) async throws -> MQTTSubscription {
        try await core.subscribe(filters, qos: qos)!
    }

    public func subscribe(_ filter: String, qos: MQTTQoS = .atLeastOnce) async throws -> MQTTSubscription {
        try await subscribe([filter], qos: qos)
    }

    /// Subscribes and hands every matching message to `deliver` on libmosquitto's thread,
    /// as soon as it is copied: for a consumer that merges messages into an input stream
    /// of its own (the coordinator's pipeline), one hand-over fewer than iterating a
    /// subscription. `deliver` must return at once (a continuation's `yield`) and never
    /// call into this client. It is called until the client shuts down; otherwise as
    /// ``subscribe(_:qos:)`` (registered for the next CONNECT when not connected).
    public func subscribe(_ filters: [String], qos: MQTTQoS = .atLeastOnce, deliver: @escaping @Sendable (MQTTMessage) -> Void) async throws {
        _ = try await core.subscribe(filters, qos: qos, deliver: deliver)
    }

    /// Sends DISCONNECT (so no will is published), stops the loop thread and fails
    /// whatever still waits. The client cannot be used afterwards.
    public func disconnect() async {
        await core.shutdown()
    }

    /// When this connection last heard from the broker (a CONNACK, an acknowledgement,
    /// a message; nil before the first CONNACK), on the monotonic clock. A connection
    /// whose TCP link was cut silently still counts as connected until libmosquitto's
    /// keepalive gives up (at least 1.5 keepalives); this says how long it has been quiet.
    public var lastHeardFromBroker: ContinuousClock.Instant? { core.lastHeard }

    /// Asks the broker for an answer that changes nothing: an UNSUBSCRIBE of `filter`
    /// (a filter this client never subscribed to), whose UNSUBACK moves
    /// ``lastHeardFromBroker``. Returns at once; does nothing without a connection.
    /// For a watcher that must tell a live broker from a silent link within seconds,
    /// faster than keepalive (libmosquitto allows no keepalive under 5 s).
    public func probe(_ filter: String) {
        core.probe(filter)
    }

    /// Stops the broker sending `filter`'s messages for now (an UNSUBSCRIBE), while the
    /// subscription stays registered: ``resumeSubscription(_:)`` subscribes it again, and
    /// so does a reconnect that finds no session kept (a clean start always: a kept
    /// session keeps the filter unsubscribed); either way the broker then sends its
    /// retained message. For a reader that needs a topic only now and then (a room's
    /// snapshot, while its changes are followed). Returns at once; does nothing without
    /// a connection. Packets leave in the order these calls are made.
    public func pauseSubscription(_ filter: String) {
        core.pauseSubscription(filter)
    }

    /// Subscribes `filter` again (a registered filter, paused or not) without waiting
    /// for the SUBACK: the broker sends its retained message again. Returns at once;
    /// does nothing without a connection (the next CONNECT subscribes every registered
    /// filter).
    public func resumeSubscription(_ filter: String) {
        core.resumeSubscription(filter)
    }

    /// Cuts the connection at once, from any thread: the socket is shut down without a
    /// DISCONNECT (the broker publishes the will), nothing queued is sent, and the
    /// client never connects again. For a coordinator whose leader lease ran out.
    /// ``disconnect()`` afterwards only waits for the loop thread to end.
    public func cutOff(reason: String) {
        core.cutOff(reason: reason)
    }
}

/// The part of the client that libmosquitto's callbacks reach through their context
/// pointer.
///
/// `@unchecked Sendable`: the raw `mosquitto*` is used by the loop thread and by
/// callers' threads at once, which libmosquitto supports once `mosquitto_threaded_set`
/// is on (its own mutexes guard the packet queues); every piece of Swift state here is
/// behind `state`, a `Mutex`.
final class ClientCore: @unchecked Sendable {
    let configuration: MQTTConfiguration
    let logger: Logger
    let mosq: OpaquePointer
    let state = Mutex(State())
    let events: AsyncStream<MQTTConnectionEvent>
    let eventsContinuation: AsyncStream<MQTTConnectionEvent>.Continuation
    /// Called with every event besides ``events`` (``MQTTClient/onEvent(_:)``).
    let eventHandlers = Mutex<[@Sendable (MQTTConnectionEvent) -> Void]>([])
    /// Wakes the loop thread out of its backoff sleep when stopping.
    let wake = DispatchSemaphore(value: 0)
    /// An eventfd that wakes the loop thread's `poll` when another thread has queued a
    /// packet (publish, subscribe, disconnect): libmosquitto's own wake-up socket pair is
    /// read only by `mosquitto_loop()`, and closed at once where it can be
    /// (``closedWakePair``). ``kick()`` writes it at most once per turn.
    let wakeFD: Int32
    let wakePending = Atomic<Bool>(false)
    /// libmosquitto's own wake-up socket pair was closed (`tandem_mosquitto_close_wake_pair`):
    /// two descriptors fewer, and no write into it for every packet queued.
    let closedWakePair: Bool
    let loopFinished = DispatchSemaphore(value: 0)
    /// Nanoseconds from ``ClientCore/clockBase`` to the last packet heard from the broker
    /// (0: none yet). Written by the thread that reads the socket.
    let lastHeardNs = Atomic<Int64>(0)
    static let clockBase = ContinuousClock.now
    /// The loop that drives the connected socket; nil: ``runLoop()`` polls it itself.
    let loop: PollLoop?
    /// The threads that connect and reconnect this client (with a `loop` only); nil:
    /// ``runLoop()`` on a thread of its own.
    let connector: MQTTConnector?
    /// The loop's bookkeeping of this client, touched only by the loop thread: its slot
    /// in the epoll set (0: not attached) and the socket registered there.
    var loopSlot: UInt64 = 0
    var loopSocket: Int32 = -1
    /// In the loop's list of clients to write (``PollLoop/markDirty(_:)``).
    let loopDirty = Atomic<Bool>(false)
    /// Signalled by the loop when it lets go of the socket (``loopFailed(_:)``).
    let handedBack = DispatchSemaphore(value: 0)
    /// The code the loop handed the socket back with (loop thread writes, then signals).
    let handBackCode = Atomic<Int32>(0)
    /// The last failed read's or write's code; touched only by the thread that drives
    /// the socket (the client's own, or its loop's while attached).
    var lastDriveCode: Int32 = 0

    struct State {
        enum Phase { case idle, running, stopping, stopped }
        var phase = Phase.idle
        var connected = false
        /// A CONNACK has been seen on this connection and subscriptions are (re)sent.
        var everConnected = false
        var nextToken: UInt64 = 1
        var publishes: [Int32: (token: UInt64, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var publishTokens: [UInt64: Int32] = [:]
        var cancelledTokens: Set<UInt64> = []
        var subscribeAcks: [Int32: SubscribeWaiter] = [:]
        var subscriptions: [UInt64: SubscriptionEntry] = [:] {
            didSet { routes = Routes(subscriptions) }
        }
        /// Where a topic's messages go, kept beside `subscriptions`.
        var routes = Routes([:])
        var connectWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        /// SUBACKs still outstanding before the connection counts as ready.
        var restoringMids: Set<Int32> = []
        var permanentFailure: MQTTError?
        var lastLibraryError: String?
        var lastProblem: String?
        /// The CONNACK's session-present flag of the current connection.
        var sessionPresent = false
        /// QoS 1 messages enqueued while there was no connection, oldest first.
        var outbox: [Outgoing] = []
        /// Set by ``ClientCore/cutOff(reason:)`` or a closed gate: nothing more is sent.
        var cutReason: String?
        /// What ``ClientCore/runLoop()`` keeps in its locals, for a client connected by an
        /// ``MQTTConnector`` (MQTTClient+Connector.swift).
        var pooled = Pooled()
    }

    /// At most this many messages wait for a connection; more are refused.
    static let outboxLimit = 100_000

    struct Outgoing {
        var topic: String
        var payload: [UInt8]
        var qos: MQTTQoS
        var retain: Bool
    }

    struct SubscriptionEntry {
        var filters: [String]
        var qos: MQTTQoS
        /// Where messages go: a stream's continuation, or a closure called on the loop
        /// thread (with no stream made).
        var target: Target

        enum Target {
            case stream(AsyncThrowingStream<MQTTMessage, any Error>.Continuation)
            case deliver(@Sendable (MQTTMessage) -> Void)
        }
    }

    /// Which subscriptions a message reaches, made from the subscriptions whenever they
    /// change (rarely: a room watched, a client closed). Every inbound message is routed,
    /// and matching it against every filter of every entry, each entry copied on the way,
    /// was a tenth of tandem-web's CPU (about ten filters a session): a filter without
    /// wildcards is found by the topic itself, and only the others are matched.
    struct Routes {
        private var exact: [String: [UInt64]] = [:]
        /// A wildcard filter's UTF-8, matched as it is against each topic.
        private var wildcards: [(filter: [UInt8], id: UInt64)] = []
        private var targets: [UInt64: SubscriptionEntry.Target] = [:]
        /// Where each topic seen so far went: most come again and again (a room's
        /// changes, the person's receipts), and matching one against every wildcard
        /// filter, then gathering its targets, was most of the routing's cost. Made anew
        /// with the routes (any change of the subscriptions); emptied past ``seenLimit``.
        private var seen: [String: [SubscriptionEntry.Target]] = [:]
        static let seenLimit = 1_024

        init(_ subscriptions: [UInt64: SubscriptionEntry]) {
            for (id, entry) in subscriptions {
                targets[id] = entry.target
                for filter in entry.filters {
                    if filter.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") }) {
                        wildcards.append((Array(filter.utf8), id))
                    } else {
                        exact[filter, default: []].append(id)
                    }
                }
            }
        }

        /// The targets of the subscriptions `topic` matches, each once.
        mutating func targets(for topic: String) -> [SubscriptionEntry.Target] {
            if let known = seen[topic] { return known }
            let found = match(topic)
            if seen.count >= Self.seenLimit { seen.removeAll(keepingCapacity: true) }
            seen[topic] = found
            return found
        }

        private func match(_ topic: String) -> [SubscriptionEntry.Target] {
            var ids = exact[topic] ?? []
            if !wildcards.isEmpty {
                var topic = topic
                topic.withUTF8 { topic in
                    for (filter, id) in wildcards where !ids.contains(id)
                        && filter.withUnsafeBufferPointer({ LibMosquitto.topicMatches(filter: $0, topic: topic) }) {
                        ids.append(id)
                    }
                }
            }
            if ids.count > 1 {
                // An entry with two filters that both match (one exact) is reached once.
                var seen = Set<UInt64>()
                ids = ids.filter { seen.insert($0).inserted }
            }
            return ids.compactMap { targets[$0] }
        }
    }

    struct SubscribeWaiter {
        var filters: [String]
        var continuation: CheckedContinuation<Void, any Error>?
    }

    init(configuration: MQTTConfiguration, loop: PollLoop?, connector: MQTTConnector? = nil, logger: Logger) throws(MQTTError) {
        _ = LibMosquitto.initialised
        self.configuration = configuration
        self.loop = loop
        self.connector = connector
        self.logger = logger
        (events, eventsContinuation) = AsyncStream.makeStream(of: MQTTConnectionEvent.self, bufferingPolicy: .bufferingNewest(64))
        // A connector's client never polls by itself (the loop wakes on its own eventfd):
        // no descriptor of its own, which counts with thousands of sessions.
        let fd = connector != nil ? -1 : eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard connector != nil || fd >= 0 else {
            throw MQTTError(.library(code: MOSQ_ERR_ERRNO.rawValue), "eventfd failed for client id \(configuration.clientId): \(String(cString: strerror(errno)))")
        }
        wakeFD = fd
        let cleanStart = configuration.session == .cleanStart
        guard let handle = mosquitto_new(configuration.clientId, cleanStart, nil) else {
            if fd >= 0 { close(fd) }
            throw MQTTError(.library(code: MOSQ_ERR_NOMEM.rawValue), "mosquitto_new failed for client id \(configuration.clientId)")
        }
        mosq = handle
        // Its wake-up pair is read only by mosquitto_loop(), which this client never runs.
        closedWakePair = tandem_mosquitto_close_wake_pair(handle) == 1
        do {
            try configure()
        } catch {
            mosquitto_destroy(handle)
            if fd >= 0 { close(fd) }
            throw error
        }
    }

    deinit {
        mosquitto_destroy(mosq)
        if wakeFD >= 0 { close(wakeFD) }
    }

    private func configure() throws(MQTTError) {
        let c = configuration
        try MQTTError.check(mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V5)), "set MQTT v5")
        try MQTTError.check(mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1), "set TCP_NODELAY")
        try MQTTError.check(mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, Int32(clamping: max(1, min(65535, c.maxInflight)))), "set send maximum")
        try MQTTError.check(mosquitto_int_option(mosq, MOSQ_OPT_RECEIVE_MAXIMUM, Int32(clamping: max(1, min(65535, c.receiveMaximum)))), "set receive maximum")
        try MQTTError.check(mosquitto_threaded_set(mosq, true), "set threaded mode")
        if let username = c.username {
            try MQTTError.check(mosquitto_username_pw_set(mosq, username, c.password), "set username")
        }
        if let tls = c.tls {
            try MQTTError.check(mosquitto_tls_set(mosq, tls.caFile, nil, tls.certFile, tls.keyFile, nil),
                                "TLS: CA file \(tls.caFile)\(tls.certFile.map { ", certificate \($0)" } ?? "")\(tls.keyFile.map { ", key \($0)" } ?? "")")
            // SSL_VERIFY_PEER (1): the broker's certificate must verify against the CA.
            try MQTTError.check(mosquitto_tls_opts_set(mosq, 1, nil, nil), "TLS options")
            // Host name verification stays on: the certificate must name the host we dial.
            try MQTTError.check(mosquitto_tls_insecure_set(mosq, false), "TLS host name verification")
            mosquitto_log_callback_set(mosq) { _, context, level, text in
                guard level == MOSQ_LOG_ERR, let text else { return }
                ClientCore.from(context).noteLibraryError(String(cString: text))
            }
        }
        if let will = c.will {
            // On success libmosquitto keeps the property list; on failure it is ours to free.
            var props = LibMosquitto.messageExpiry(will.messageExpirySeconds)
            let rc = will.payload.withUnsafeBytes { buf in
                mosquitto_will_set_v5(mosq, will.topic, Int32(buf.count), buf.baseAddress, will.qos.rawValue, will.retain, props)
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue { mosquitto_property_free_all(&props) }
            try MQTTError.check(rc, "set will on \(will.topic)")
        }
        mosquitto_user_data_set(mosq, Unmanaged.passUnretained(self).toOpaque())
        installCallbacks()
    }

    var isConnected: Bool { state.withLock { $0.connected } }

    /// Notes that the broker was heard from just now (callbacks, on the reading thread).
    func heard() {
        let since = ContinuousClock.now - Self.clockBase
        lastHeardNs.store(max(1, since.components.seconds * 1_000_000_000 + since.components.attoseconds / 1_000_000_000), ordering: .relaxed)
    }

    var lastHeard: ContinuousClock.Instant? {
        let ns = lastHeardNs.load(ordering: .relaxed)
        return ns == 0 ? nil : Self.clockBase + .nanoseconds(ns)
    }

    func probe(_ filter: String) {
        state.withLock { s in
            guard s.connected, closedReason(&s) == nil else { return }
            _ = mosquitto_unsubscribe_v5(mosq, nil, filter, nil)
            kick()
        }
    }

    func pauseSubscription(_ filter: String) {
        state.withLock { s in
            guard s.connected, closedReason(&s) == nil else { return }
            _ = mosquitto_unsubscribe_v5(mosq, nil, filter, nil)
            kick()
        }
    }

    func resumeSubscription(_ filter: String) {
        state.withLock { s in
            guard s.connected, closedReason(&s) == nil,
                  let entry = s.subscriptions.values.first(where: { $0.filters.contains(filter) }) else { return }
            // The SUBACK finds no waiter: refused filters are logged (``didSubscribe(mid:granted:)``).
            _ = mosquitto_subscribe_v5(mosq, nil, filter, entry.qos.rawValue, 0, nil)
            kick()
        }
    }

    // MARK: The gate

    /// Why nothing may be sent any more (the client was cut off or its gate closed);
    /// nil while it may. Call with the state lock held.
    func closedReason(_ s: inout State) -> String? {
        if let reason = s.cutReason { return reason }
        if let gate = configuration.gate, !gate() {
            s.cutReason = "the gate closed"
            return s.cutReason
        }
        return nil
    }

    func cutOff(reason: String) {
        let first = state.withLock { s -> Bool in
            guard s.cutReason == nil else { return false }
            s.cutReason = reason
            return true
        }
        if first { logger.warning("MQTT connection \(configuration.clientId) cut off: \(reason)") }
        shutSocket()
        loop?.detach(self)
        wake.signal()
        pooledWake()
    }

    /// The connection's socket, -1 without one.
    var socketDescriptor: Int32 { mosquitto_socket(mosq) }

    /// shutdown(2), not close(2): the descriptor stays valid for the loop thread, which
    /// sees the connection fail; nothing more is sent on it, not even a DISCONNECT.
    func shutSocket() {
        let fd = mosquitto_socket(mosq)
        if fd >= 0 { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }

    // MARK: Connecting

    func connect() async throws {
        let token = state.withLock { s -> UInt64 in
            defer { s.nextToken += 1 }
            return s.nextToken
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let action: (any Error)?? = state.withLock { s in
                    if let failure = s.permanentFailure { return .some(failure) }
                    if s.phase == .stopping || s.phase == .stopped { return .some(MQTTError(.shutDown, "the client is shut down")) }
                    if s.cancelledTokens.remove(token) != nil { return .some(CancellationError()) }
                    if s.connected && s.restoringMids.isEmpty { return .some(nil) }
                    s.connectWaiters[token] = continuation
                    return .none
                }
                switch action {
                case .some(.some(let error)): continuation.resume(throwing: error)
                case .some(.none): continuation.resume()
                case .none: startLoopIfNeeded()
                }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Void, any Error>? in
                if let w = s.connectWaiters.removeValue(forKey: token) { return w }
                s.cancelledTokens.insert(token)
                return nil
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    func startLoopIfNeeded() {
        let start = state.withLock { s -> Bool in
            guard s.phase == .idle else { return false }
            s.phase = .running
            return true
        }
        guard start else { return }
        if let connector {
            connector.submit { [self] in pooledStep() }
            return
        }
        let thread = Thread { [self] in self.runLoop() }
        thread.name = "mqtt-\(configuration.clientId)"
        thread.start()
    }

    /// The loop thread: connect, run libmosquitto's loop, and on failure wait a backoff
    /// and connect again, until stopped or refused for good.
    func runLoop() {
        var delay = configuration.reconnectDelay
        var socketOpen = false
        var closedUnanswered = 0
        defer { loopFinished.signal() }
        while true {
            let (phase, cut) = state.withLock { s in (s.phase, closedReason(&s)) }
            if phase != .running { break }
            if let cut {
                fence(reason: cut)
                break
            }
            if !socketOpen {
                let rc = connectOnce()
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    socketOpen = true
                    // This attempt got through to the port: what an earlier one met
                    // (refused, unreachable) is no longer why we are not connected.
                    state.withLock { $0.lastProblem = nil }
                } else if rc == MOSQ_ERR_TLS.rawValue, failTLSForGood() {
                    break
                } else {
                    let reason = "connect to \(configuration.host):\(configuration.port) failed: \(LibMosquitto.errorString(rc)) (errno \(errno): \(String(cString: strerror(errno))))"
                    state.withLock { $0.lastProblem = reason }
                    logger.info("cannot connect; retrying", metadata: ["reason": "\(reason)", "mqtt.retry_seconds": "\(delay)"])
                    emit(.disconnected(reason: reason))
                    _ = wake.wait(timeout: .now() + delay)
                    delay = min(delay * 2, configuration.reconnectDelayMax)
                    continue
                }
            }
            let rc: Int32
            if let loop {
                // The loop drives the socket until a read or write fails, the gate
                // closes or we stop; then it is ours again.
                loop.attach(self)
                handedBack.wait()
                rc = handBackCode.load(ordering: .acquiring)
                // Handed back to stop, cut off or for the gate: the checks at the top decide.
                if rc == MOSQ_ERR_SUCCESS.rawValue { continue }
            } else {
                // With a gate, wake up often enough to notice it closing.
                rc = loopOnce(timeout: configuration.gate == nil ? 1000 : 100)
            }
            if rc == MOSQ_ERR_TLS.rawValue, failTLSForGood() {
                socketOpen = false
                break
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                socketOpen = false
                // A port that takes the TCP connection and closes it without a word of
                // MQTT (a TLS listener dialled in clear, another service) is said so; three
                // times in a row before this client was ever connected, it is given up on.
                let answered = state.withLock { $0.connected }
                closedUnanswered = answered ? 0 : closedUnanswered + 1
                let wasConnected = markDisconnected(reason: answered
                    ? "connection lost: \(LibMosquitto.errorString(rc))"
                    : notMQTTReason)
                if closedUnanswered >= 3, failNotMQTTForGood() { break }
                if wasConnected { delay = configuration.reconnectDelay }
                let (phase, permanent) = state.withLock { ($0.phase, $0.permanentFailure) }
                if phase != .running || permanent != nil { break }
                logger.info("connection lost; reconnecting", metadata: [
                    "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)",
                    "reason": "\(LibMosquitto.errorString(rc))", "mqtt.retry_seconds": "\(delay)",
                ])
                _ = wake.wait(timeout: .now() + delay)
                delay = min(delay * 2, configuration.reconnectDelayMax)
            }
        }
        // Flush a final DISCONNECT if one was queued (never once cut off).
        if socketOpen, state.withLock({ $0.cutReason == nil }) {
            for _ in 0..<20 where loopOnce(timeout: 50) == MOSQ_ERR_SUCCESS.rawValue {}
        }
        _ = markDisconnected(reason: "client shut down")
        state.withLock { $0.phase = .stopped }
    }

    /// One turn of the loop, what `mosquitto_loop(mosq, timeout, 1)` does, over `poll(2)`:
    /// wait until the socket is readable (or writable, when libmosquitto has something to
    /// send), another thread kicked, or `timeout` milliseconds passed; then read, write and
    /// run libmosquitto's keepalive. Returns libmosquitto's code; anything but success
    /// means the connection is gone (libmosquitto has closed the socket).
    func loopOnce(timeout: Int32) -> Int32 {
        let sock = mosquitto_socket(mosq)
        guard sock >= 0 else { return MOSQ_ERR_NO_CONN.rawValue }
        // Read without libmosquitto's lock (it has no locked accessor): a packet queued
        // just after this look also kicks, so the poll below wakes for it.
        let wantWrite = mosquitto_want_write(mosq)
        var fds = (
            pollfd(fd: sock, events: Int16(POLLIN) | (wantWrite ? Int16(POLLOUT) : 0), revents: 0),
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
        let ready = withUnsafeMutableBytes(of: &fds) { raw in
            poll(raw.baseAddress!.assumingMemoryBound(to: pollfd.self), 2, timeout)
        }
        if ready < 0 {
            return errno == EINTR ? MOSQ_ERR_SUCCESS.rawValue : MOSQ_ERR_ERRNO.rawValue
        }
        var write = fds.0.revents & Int16(POLLOUT) != 0
        if fds.1.revents & Int16(POLLIN) != 0 {
            // Drain first, then allow the next kick: a packet queued after the drain
            // either is seen by this turn's write or writes the eventfd again.
            var count: UInt64 = 0
            _ = read(wakeFD, &count, MemoryLayout<UInt64>.size)
            wakePending.store(false, ordering: .sequentiallyConsistent)
            write = true
        }
        // With TLS, a handshake still under way goes on in mosquitto_loop_read (for
        // writability as well: the TLS layer may have asked for it).
        let read = fds.0.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0
            || (write && configuration.tls != nil)
        if read {
            let rc = driveRead()
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        if write {
            // Not corked: a client of its own thread writes a packet or two at a time.
            let rc = driveWrite(corked: false)
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        return mosquitto_loop_misc(mosq)
    }

    // MARK: Reading and writing the socket (the client's thread, or its PollLoop's)

    /// Reads what the socket holds, packet after packet (libmosquitto reads at most as
    /// many as it has QoS 1 messages in flight per call), up to a bound per call.
    /// Anything but success: the connection is gone (``lastDriveCode`` says why).
    ///
    /// With libmosquitto's reads buffered (``LibMosquitto/buffersReads``, not TLS), one
    /// `read(2)` took what the socket held (up to 16 KiB), so more to read is what that
    /// buffer still holds; what arrived since is the next wake's (poll and epoll report
    /// it again). What the buffer holds is always taken, since nothing would wake the
    /// loop for it: past the bound the buffer is only emptied, not filled again
    /// (`tandem_mosquitto_reads_held_only`), and the socket's rest waits for the next
    /// turn. Otherwise the kernel is asked (`FIONREAD`).
    func driveRead() -> Int32 {
        var sock = mosquitto_socket(mosq)
        let buffered = LibMosquitto.buffersReads && configuration.tls == nil && tandem_mosquitto_reads_cover(sock) != 0
        var heldOnly: Int32 = -1
        defer {
            // (A socket libmosquitto closed meanwhile was let go by the close.)
            if heldOnly >= 0, mosquitto_socket(mosq) == heldOnly { tandem_mosquitto_reads_held_only(heldOnly, 0) }
        }
        for calls in 1...Int.max {
            errno = 0
            let rc = mosquitto_loop_read(mosq, 1)
            sock = mosquitto_socket(mosq)
            if rc != MOSQ_ERR_SUCCESS.rawValue || sock < 0 {
                lastDriveCode = rc == MOSQ_ERR_SUCCESS.rawValue ? MOSQ_ERR_CONN_LOST.rawValue : rc
                return lastDriveCode
            }
            // A call may take several packets and fill the buffer again on the way.
            if tandem_mosquitto_reads_buffered(sock) > 0 {
                if calls >= Self.readsPerDrive, heldOnly < 0 {
                    heldOnly = sock
                    tandem_mosquitto_reads_held_only(sock, 1)
                }
                continue
            }
            if buffered || calls >= Self.readsPerDrive { break }
            var pending: Int32 = 0
            guard ioctl(sock, UInt(FIONREAD), &pending) == 0, pending > 0 else { break }
        }
        return MOSQ_ERR_SUCCESS.rawValue
    }

    /// The calls to `mosquitto_loop_read` one drive makes before it lets the loop's other
    /// work have a turn (what the read buffer holds is still taken).
    static let readsPerDrive = 4096

    /// Writes every packet queued (one write each, as libmosquitto does). `corked` (a
    /// PollLoop's turn): the packets leave in as few TCP segments as fit, so that neither
    /// this process nor the broker handles a segment per packet; two more system calls,
    /// worth it only for a batch. (With TLS, records are the unit: left as they are.)
    func driveWrite(corked: Bool) -> Int32 {
        guard mosquitto_want_write(mosq) else { return MOSQ_ERR_SUCCESS.rawValue }
        let sock = mosquitto_socket(mosq)
        let cork = corked && configuration.tls == nil && sock >= 0
        var on: Int32 = 1
        if cork { _ = setsockopt(sock, Int32(IPPROTO_TCP), TCP_CORK, &on, socklen_t(MemoryLayout<Int32>.size)) }
        let rc = mosquitto_loop_write(mosq, 1)
        if cork, mosquitto_socket(mosq) == sock {
            var off: Int32 = 0
            _ = setsockopt(sock, Int32(IPPROTO_TCP), TCP_CORK, &off, socklen_t(MemoryLayout<Int32>.size))
        }
        if rc != MOSQ_ERR_SUCCESS.rawValue || mosquitto_socket(mosq) < 0 {
            lastDriveCode = rc == MOSQ_ERR_SUCCESS.rawValue ? MOSQ_ERR_CONN_LOST.rawValue : rc
            return lastDriveCode
        }
        return MOSQ_ERR_SUCCESS.rawValue
    }

    /// Whether the client was cut off, stopped or its gate closed: the loop hands the
    /// socket back so that this client's thread acts on it.
    var gateClosed: Bool {
        state.withLock { s in s.phase != .running || closedReason(&s) != nil }
    }

    /// The loop lets go of the socket: `rc` is a failed read's or write's code, or
    /// success when it was asked to (or the client is stopping).
    func loopFailed(_ rc: Int32) {
        lastDriveCode = 0
        if let connector {
            connector.submit { [self] in pooledHandedBack(rc) }
            return
        }
        handBackCode.store(rc, ordering: .releasing)
        handedBack.signal()
    }

    /// Wakes the loop thread after this thread queued a packet with libmosquitto, so
    /// that it is written now rather than at the next timeout. Cheap when the loop has
    /// not yet taken the previous kick.
    func kick() {
        if let loop {
            loop.markDirty(self)
            return
        }
        guard !wakePending.exchange(true, ordering: .sequentiallyConsistent) else { return }
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    /// The gate closed or the client was cut off: shut the socket without a DISCONNECT,
    /// fail every waiter with ``MQTTError/Kind/fenced`` and let the loop end.
    func fence(reason: String) {
        shutSocket()
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            if s.permanentFailure == nil {
                s.permanentFailure = MQTTError(.fenced, "\(configuration.clientId): \(reason)")
            }
            s.phase = .stopping
            s.outbox.removeAll()
            defer { s.connectWaiters.removeAll() }
            return Array(s.connectWaiters.values)
        }
        let error = state.withLock { $0.permanentFailure! }
        waiters.forEach { $0.resume(throwing: error) }
    }

    /// A TLS failure before the first connection ever succeeded (the broker's certificate
    /// does not verify against the CA file, or does not name the host; a plain listener
    /// on that port) is configuration, which retrying cannot fix: every waiting
    /// `connect()` fails with a readable error and the loop stops. Returns false once
    /// connected before: then a TLS error is a network fault and is retried.
    func failTLSForGood() -> Bool {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>]? in
            guard !s.everConnected else { return nil }
            let detail = s.lastLibraryError.map { ": \($0)" } ?? ""
            let error = MQTTError(.library(code: MOSQ_ERR_TLS.rawValue),
                "TLS handshake with \(configuration.host):\(configuration.port) failed\(detail) (is the broker's certificate signed by the CA in \(configuration.tls?.caFile ?? "(no CA file)") and issued for \(configuration.host)? is that port a TLS listener?)")
            s.permanentFailure = error
            defer { s.connectWaiters.removeAll() }
            return Array(s.connectWaiters.values)
        }
        guard let waiters else { return false }
        let error = state.withLock { $0.permanentFailure! }
        logger.error("TLS handshake failed; not retrying", error: error)
        emit(.disconnected(reason: error.message))
        waiters.forEach { $0.resume(throwing: error) }
        return true
    }

    var notMQTTReason: String {
        "\(configuration.host):\(configuration.port) took the connection and closed it without an MQTT answer (is that port an MQTT broker? a TLS listener needs --tls-ca-file)"
    }

    /// After a port closed the connection three times without an MQTT answer, before this
    /// client was ever connected: not retrying (a reconnecting client keeps trying).
    func failNotMQTTForGood() -> Bool {
        let error = MQTTError(.library(code: MOSQ_ERR_PROTOCOL.rawValue), notMQTTReason)
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>]? in
            guard !s.everConnected else { return nil }
            s.permanentFailure = error
            defer { s.connectWaiters.removeAll() }
            return Array(s.connectWaiters.values)
        }
        guard let waiters else { return false }
        logger.error("not an MQTT broker; not retrying", error: error)
        emit(.disconnected(reason: error.message))
        waiters.forEach { $0.resume(throwing: error) }
        return true
    }

    /// libmosquitto's own error lines (OpenSSL's reason for a failed handshake): the last
    /// one goes into the error a failed TLS connect reports.
    func noteLibraryError(_ text: String) {
        state.withLock { $0.lastLibraryError = text }
    }

    func connectOnce() -> Int32 {
        var props: OpaquePointer? = nil  // mosquitto_property list (opaque to Swift)
        if case .persistent(let expiry) = configuration.session {
            mosquitto_property_add_int32(&props, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), expiry)
        }
        defer { mosquitto_property_free_all(&props) }
        return mosquitto_connect_bind_v5(
            mosq, configuration.host, Int32(configuration.port), Int32(configuration.keepAlive), nil, props)
    }

    // MARK: Publishing

    func enqueue(_ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) throws(MQTTError) {
        // Under the lock, so that messages leave in the order they were enqueued even
        // while the outbox is being flushed on a reconnect.
        let result: Result<Void, MQTTError> = state.withLock { s in
            guard s.phase != .stopping, s.phase != .stopped else {
                return .failure(MQTTError(.shutDown, "publish to \(topic): the client is shut down"))
            }
            if let closed = closedReason(&s) {
                return .failure(MQTTError(.fenced, "publish to \(topic): \(closed)"))
            }
            if !s.connected || !s.outbox.isEmpty {
                // libmosquitto refuses to publish without a connection: keep QoS 1 here.
                guard qos == .atLeastOnce else { return .failure(MQTTError(.notConnected, "publish to \(topic): not connected")) }
                guard s.outbox.count < ClientCore.outboxLimit else {
                    return .failure(MQTTError(.notConnected, "publish to \(topic): not connected and \(ClientCore.outboxLimit) messages already wait"))
                }
                s.outbox.append(Outgoing(topic: topic, payload: payload, qos: qos, retain: retain))
                return .success(())
            }
            let rc = send(Outgoing(topic: topic, payload: payload, qos: qos, retain: retain))
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                return .failure(MQTTError(.library(code: rc), "publish to \(topic): \(LibMosquitto.errorString(rc))"))
            }
            return .success(())
        }
        try result.get()
    }

    /// Hands one message to libmosquitto.
    func send(_ message: Outgoing) -> Int32 {
        defer { kick() }
        return message.payload.withUnsafeBytes { buf in
            mosquitto_publish_v5(mosq, nil, message.topic, Int32(buf.count), buf.baseAddress, message.qos.rawValue, message.retain, nil)
        }
    }

    /// Sends what waited in the outbox; call with the state lock held, once connected.
    func flushOutbox(_ s: inout State) {
        guard closedReason(&s) == nil else { return }
        var sent = 0
        for message in s.outbox {
            guard send(message) == MOSQ_ERR_SUCCESS.rawValue else { break }
            sent += 1
        }
        s.outbox.removeFirst(sent)
    }

    func publish(_ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, messageExpirySeconds: UInt32? = nil) async throws {
        if qos == .atMostOnce {
            guard isConnected else { throw MQTTError(.notConnected, "publish to \(topic): not connected") }
            try enqueue(topic, payload: payload, qos: qos, retain: retain)
            return
        }
        let token = state.withLock { s -> UInt64 in
            defer { s.nextToken += 1 }
            return s.nextToken
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // The lock is held across mosquitto_publish so that the PUBACK callback,
                // which takes the same lock, cannot run before the continuation is filed.
                let failure: (any Error)? = state.withLock { s in
                    if s.cancelledTokens.remove(token) != nil { return CancellationError() }
                    guard s.phase == .running else { return MQTTError(.shutDown, "publish to \(topic): the client is shut down") }
                    if let closed = closedReason(&s) { return MQTTError(.fenced, "publish to \(topic): \(closed)") }
                    guard s.connected else { return MQTTError(.notConnected, "publish to \(topic): not connected") }
                    var mid: Int32 = 0
                    var props = LibMosquitto.messageExpiry(messageExpirySeconds)
                    defer { mosquitto_property_free_all(&props) }
                    let rc = payload.withUnsafeBytes { buf in
                        mosquitto_publish_v5(mosq, &mid, topic, Int32(buf.count), buf.baseAddress, qos.rawValue, retain, props)
                    }
                    kick()
                    if rc != MOSQ_ERR_SUCCESS.rawValue {
                        return MQTTError(.library(code: rc), "publish to \(topic): \(LibMosquitto.errorString(rc))")
                    }
                    s.publishes[mid] = (token, continuation)
                    s.publishTokens[token] = mid
                    return nil
                }
                if let failure { continuation.resume(throwing: failure) }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Void, any Error>? in
                guard let mid = s.publishTokens.removeValue(forKey: token) else {
                    s.cancelledTokens.insert(token)
                    return nil
                }
                return s.publishes.removeValue(forKey: mid)?.continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    // MARK: Subscribing

    /// Returns the subscription's stream; nil for a delivering one (no stream is made).
    func subscribe(_ filters: [String], qos: MQTTQoS, deliver: (@Sendable (MQTTMessage) -> Void)? = nil) async throws -> MQTTSubscription? {
        for filter in filters {
            guard mosquitto_sub_topic_check(filter) == MOSQ_ERR_SUCCESS.rawValue else {
                throw MQTTError(.library(code: MOSQ_ERR_INVAL.rawValue), "invalid topic filter: \(filter)")
            }
        }
        let subscription: MQTTSubscription?
        let target: SubscriptionEntry.Target
        if let deliver {
            // A delivering subscription has no stream that anyone holds: it lasts as long
            // as the client.
            subscription = nil
            target = .deliver(deliver)
        } else {
            let (stream, continuation) = AsyncThrowingStream.makeStream(of: MQTTMessage.self)
            subscription = MQTTSubscription(stream: stream)
            target = .stream(continuation)
        }
        let (id, connected) = state.withLock { s -> (UInt64, Bool) in
            let id = s.nextToken
            s.nextToken += 1
            s.subscriptions[id] = SubscriptionEntry(filters: filters, qos: qos, target: target)
            return (id, s.connected)
        }
        // A stream's end removes its subscription.
        if case .stream(let continuation) = target {
            continuation.onTermination = { [weak self] _ in self?.removeSubscription(id) }
        }
        guard connected else { return subscription }
        do {
            try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
                enum Filed { case waiting, restoredOnReconnect, failed(MQTTError) }
                let filed: Filed = state.withLock { s in
                    // Dropped meanwhile: the reconnect resends every registered filter.
                    guard s.connected else { return .restoredOnReconnect }
                    do throws(MQTTError) {
                        let mid = try sendSubscribe(filters, qos: qos)
                        s.subscribeAcks[mid] = SubscribeWaiter(filters: filters, continuation: waiter)
                        return .waiting
                    } catch {
                        return .failed(error)
                    }
                }
                switch filed {
                case .waiting: break
                case .restoredOnReconnect: waiter.resume()
                case .failed(let error): waiter.resume(throwing: error)
                }
            }
        } catch {
            removeSubscription(id)
            throw error
        }
        return subscription
    }

    /// Sends SUBSCRIBE; call with the state lock held so the SUBACK cannot overtake.
    func sendSubscribe(_ filters: [String], qos: MQTTQoS) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        var cStrings = filters.map { strdup($0) }
        defer { cStrings.forEach { free($0) } }
        let rc = cStrings.withUnsafeMutableBufferPointer { buf in
            buf.baseAddress!.withMemoryRebound(to: UnsafeMutablePointer<CChar>?.self, capacity: buf.count) { ptr in
                mosquitto_subscribe_multiple(mosq, &mid, Int32(filters.count), ptr, qos.rawValue, 0, nil)
            }
        }
        kick()
        try MQTTError.check(rc, "subscribe to \(filters.joined(separator: ", "))")
        return mid
    }

    func removeSubscription(_ id: UInt64) {
        state.withLock { s in
            guard let entry = s.subscriptions.removeValue(forKey: id) else { return }
            let stillUsed = Set(s.subscriptions.values.flatMap(\.filters))
            let unused = entry.filters.filter { !stillUsed.contains($0) }
            // A persistent session's subscriptions belong to the session: the broker keeps
            // queueing for them while we are away, which is the point of the session.
            guard s.connected, !unused.isEmpty, configuration.session == .cleanStart else { return }
            for filter in unused {
                _ = mosquitto_unsubscribe_v5(mosq, nil, filter, nil)
            }
            kick()
        }
    }

    // MARK: Shutting down

    func shutdown() async {
        let wasRunning = state.withLock { s -> Bool in
            let running = s.phase == .running
            if s.phase == .idle { s.phase = .stopped }
            if running { s.phase = .stopping }
            return running
        }
        guard wasRunning else {
            _ = markDisconnected(reason: "client shut down")
            return
        }
        _ = mosquitto_disconnect_v5(mosq, 0, nil)
        kick()
        loop?.detach(self)
        wake.signal()
        if connector != nil {
            // No thread to wait on: the connector's last step resumes this.
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let stopped = state.withLock { s -> Bool in
                    guard s.phase != .stopped else { return true }
                    s.pooled.stopWaiters.append(done)
                    return false
                }
                if stopped { done.resume() } else { pooledWake() }
            }
            return
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread { [self] in
                loopFinished.wait()
                done.resume()
            }
            thread.start()
        }
    }

    /// Tells ``events`` and the ``eventHandlers``. Never with the state's lock held.
    func emit(_ event: MQTTConnectionEvent) {
        eventsContinuation.yield(event)
        for handler in eventHandlers.withLock({ $0 }) { handler(event) }
    }

    /// Stops the loop thread without waiting (deinit of the owning client).
    func stopLoop() {
        let running = state.withLock { s -> Bool in
            let running = s.phase == .running
            s.phase = .stopping
            return running
        }
        if running {
            _ = mosquitto_disconnect_v5(mosq, 0, nil)
            kick()
            loop?.detach(self)
            wake.signal()
            pooledWake()
            // On the loop's own thread, waiting would stop the loop that must hand the
            // socket back: the client's thread ends on its own (a connector's thread too).
            if loop?.isOnLoopThread != true, connector?.isOnConnectorThread != true { loopFinished.wait() }
        }
        eventsContinuation.finish()
    }

    /// Fails everything that waits on this connection; returns whether it was up.
    func markDisconnected(reason: String) -> Bool {
        let (wasConnected, publishes, acks, connectWaiters, permanent, stopping) = state.withLock { s in
            if s.phase == .running { s.lastProblem = reason }
            let was = s.connected
            s.connected = false
            let p = s.publishes.values.map(\.continuation)
            s.publishes.removeAll()
            s.publishTokens.removeAll()
            let a = s.subscribeAcks.values.compactMap(\.continuation)
            s.subscribeAcks.removeAll()
            s.restoringMids.removeAll()
            var waiters: [CheckedContinuation<Void, any Error>] = []
            let stopping = s.phase != .running
            if s.permanentFailure != nil || stopping {
                waiters = Array(s.connectWaiters.values)
                s.connectWaiters.removeAll()
            }
            return (was, p, a, waiters, s.permanentFailure, stopping)
        }
        let error = MQTTError(.disconnected, reason)
        publishes.forEach { $0.resume(throwing: error) }
        acks.forEach { $0.resume(throwing: error) }
        let waiterError = permanent ?? MQTTError(.shutDown, reason)
        connectWaiters.forEach { $0.resume(throwing: waiterError) }
        if wasConnected { emit(.disconnected(reason: reason)) }
        if stopping {
            let subs = state.withLock { s -> [AsyncThrowingStream<MQTTMessage, any Error>.Continuation] in
                defer { s.subscriptions.removeAll() }
                return s.subscriptions.values.compactMap { entry in
                    if case .stream(let continuation) = entry.target { continuation } else { nil }
                }
            }
            subs.forEach { $0.finish() }
        }
        return wasConnected
    }
}
