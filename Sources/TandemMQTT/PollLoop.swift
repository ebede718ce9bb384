#if canImport(Glibc)
import Glibc
#endif
import CMosquitto
import CPoll
import Foundation
import Synchronization

/// One thread that does a consumer's work and its MQTT sessions' socket I/O, in turns:
/// wait in `poll(2)` for the sockets, an eventfd or the next timer; read every socket
/// that is readable (libmosquitto's callbacks run here); run the Swift jobs that were
/// enqueued (it is a `SerialExecutor` and a `TaskExecutor`: a task that prefers it, and
/// an actor that uses it, run on this thread); fire the timers that are due; write what
/// was queued, each socket once. A busy loop then waits for what is left of
/// ``turnSpacing`` before it polls again, so that what arrives in the meantime is taken
/// in one wake: at load, one thread switch per turn instead of one per packet, and the
/// publications of a turn written back to back.
///
/// Connecting (which blocks in libmosquitto) and reconnecting stay on each client's own
/// thread: a client attaches its socket here once connected (``MQTTClient`` with
/// `loop:`) and is handed back the code of a failed read or write.
///
/// `@unchecked Sendable`: the attached clients and the thread's own state are touched
/// only by the loop thread; what other threads reach (jobs, timers, attach requests)
/// is behind `shared`, a `Mutex`.
public final class PollLoop: SerialExecutor, TaskExecutor, @unchecked Sendable {
    /// At load, the least time from one turn's wake to the next poll. Zero: poll again at once.
    public let turnSpacing: Duration
    public let name: String

    struct Timer {
        var at: ContinuousClock.Instant
        var body: @Sendable () -> Void
    }

    struct Shared {
        var jobs: [UnownedJob] = []
        var timers: [Timer] = []
        var attaching: [ClientCore] = []
        var detaching: [ObjectIdentifier] = []
        var stopping = false
        /// The thread has ended: nothing more is run or driven.
        var stopped = false

        /// When the earliest timer is due.
        var nextTimer: ContinuousClock.Instant? { timers.lazy.map(\.at).min() }
    }

    let shared = Mutex(Shared())
    /// Written (at most once per turn) by another thread that enqueued work.
    let wakeFD: Int32
    let wakePending = Atomic<Bool>(false)
    /// The loop thread's id, once it runs (`pthread_self`).
    let threadId = Atomic<UInt>(0)
    let finished = DispatchSemaphore(value: 0)

    /// How many times a turn runs the jobs that its jobs enqueued before it goes on to
    /// the sockets: enough for a step, its commit and its publications (four), bounded so
    /// that a task that keeps enqueueing cannot keep the sockets waiting.
    static let passesPerTurn = 8

    /// Loop-thread-only: the clients whose sockets it drives.
    private var clients: [ClientCore] = []

    /// Starts the loop's thread. `turnSpacing`: see the type's documentation. Throws when
    /// the process has no file descriptor left for its wake-up eventfd.
    public init(name: String, turnSpacing: Duration = .microseconds(1000)) throws(MQTTError) {
        self.name = name
        self.turnSpacing = turnSpacing
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard fd >= 0 else {
            throw MQTTError(.library(code: MOSQ_ERR_ERRNO.rawValue), "eventfd failed for the loop \(name): \(String(cString: strerror(errno)))")
        }
        wakeFD = fd
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    deinit {
        close(wakeFD)
    }

    /// Ends the thread once what is queued has run. Disconnect the clients first: one
    /// still attached is handed back to its own thread, and one that attaches afterwards
    /// is told its connection is lost. Jobs and timers enqueued after the end never run.
    public func stop() {
        shared.withLock { $0.stopping = true }
        wakeUp()
    }

    /// Waits for the thread to end (after ``stop()``). Never from the loop thread.
    public func waitUntilStopped() {
        precondition(!isOnLoopThread, "waitUntilStopped() on the loop's own thread")
        finished.wait()
    }

    public var isOnLoopThread: Bool {
        threadId.load(ordering: .acquiring) == Self.currentThreadId
    }

    // MARK: Executor

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        shared.withLock { $0.jobs.append(job) }
        wakeUp()
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    public func checkIsolated() {
        precondition(isOnLoopThread, "not on the loop thread of \(name)")
    }

    /// Runs `body` on the loop thread at `instant` (or at the first turn after it).
    public func schedule(at instant: ContinuousClock.Instant, _ body: @escaping @Sendable () -> Void) {
        shared.withLock { $0.timers.append(Timer(at: instant, body: body)) }
        wakeUp()
    }

    /// Makes the loop thread look at its queues now (a no-op on the loop thread itself,
    /// which looks before it polls again).
    func wakeUp() {
        guard !isOnLoopThread else { return }
        guard !wakePending.exchange(true, ordering: .sequentiallyConsistent) else { return }
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    // MARK: Clients

    /// From a client's own thread, once its socket is connected: the loop drives it
    /// until a read or write fails (``ClientCore/loopFailed(_:)``) or ``detach(_:)``.
    func attach(_ client: ClientCore) {
        let refused = shared.withLock { s -> Bool in
            guard !s.stopped else { return true }
            s.attaching.append(client)
            return false
        }
        // A stopped loop drives nothing: the client's thread hears of it at once (as a
        // lost connection) instead of waiting for ever.
        if refused { client.loopFailed(MOSQ_ERR_CONN_LOST.rawValue) } else { wakeUp() }
    }

    /// Stops driving `client` after this turn's write (its thread then closes the socket
    /// or runs it itself); the loop answers with ``ClientCore/loopFailed(_:)`` and
    /// `MOSQ_ERR_SUCCESS`.
    func detach(_ client: ClientCore) {
        shared.withLock { $0.detaching.append(ObjectIdentifier(client)) }
        wakeUp()
    }

    // MARK: The thread

    private func run() {
        threadId.store(Self.currentThreadId, ordering: .releasing)
        defer { finished.signal() }
        let serial = asUnownedSerialExecutor()
        let task = asUnownedTaskExecutor()
        var fds: [pollfd] = []
        var jobs: [UnownedJob] = []
        var due: [Timer] = []
        var handBack: [(Int, Int32)] = []
        var lastWake = ContinuousClock.now
        var lastMisc = ContinuousClock.now
        var reruns = 0
        while true {
            // What other threads asked for, and the timers that are due. The arrays are
            // swapped, not copied: no allocation a turn.
            jobs.removeAll(keepingCapacity: true)
            due.removeAll(keepingCapacity: true)
            let attaching = shared.withLock { s -> [ClientCore] in
                swap(&jobs, &s.jobs)
                if let next = s.nextTimer, next <= .now {
                    let now = ContinuousClock.now
                    // Several due in one turn (a late turn) fire in their deadlines' order.
                    due = s.timers.filter { $0.at <= now }.sorted { $0.at < $1.at }
                    s.timers.removeAll { $0.at <= now }
                }
                guard !s.attaching.isEmpty else { return [] }
                defer { s.attaching.removeAll() }
                return s.attaching
            }
            clients.append(contentsOf: attaching)
            for job in jobs { job.runSynchronously(isolatedTo: serial, taskExecutor: task) }
            for timer in due { timer.body() }
            // What those enqueued runs in this turn too, before anything is written (a
            // step's commit, the commit's end, the publications it lets go), up to a few
            // passes; then the sockets get their turn, and whatever keeps coming is run
            // after the next poll, which then does not wait.
            if reruns < Self.passesPerTurn, !jobs.isEmpty || !due.isEmpty, shared.withLock({ !$0.jobs.isEmpty }) {
                reruns += 1
                continue
            }
            reruns = 0

            // Write what this turn queued, each socket once; keepalive and the gates.
            handBack.removeAll(keepingCapacity: true)
            for (i, client) in clients.enumerated() where client.driveWrite(corked: true) != MOSQ_ERR_SUCCESS.rawValue {
                handBack.append((i, client.lastDriveCode))
            }
            let now = ContinuousClock.now
            if now - lastMisc >= .milliseconds(100) {
                lastMisc = now
                for (i, client) in clients.enumerated() where !handBack.contains(where: { $0.0 == i }) {
                    if client.gateClosed {
                        handBack.append((i, MOSQ_ERR_SUCCESS.rawValue))
                    } else if mosquitto_loop_misc(client.mosq) != MOSQ_ERR_SUCCESS.rawValue || mosquitto_socket(client.mosq) < 0 {
                        handBack.append((i, MOSQ_ERR_CONN_LOST.rawValue))
                    }
                }
            }
            // Asked to let go (stopping, cut off): after the write, so that a DISCONNECT
            // queued by a shutdown has left. With it, in one look: whether anything
            // waits, and the next timer.
            let (detaching, stopping, waiting, nextTimer) = shared.withLock { s in
                defer { if !s.detaching.isEmpty { s.detaching.removeAll() } }
                return (s.detaching, s.stopping, !s.jobs.isEmpty || !s.attaching.isEmpty, s.nextTimer)
            }
            for id in detaching {
                if let i = clients.firstIndex(where: { ObjectIdentifier($0) == id }), !handBack.contains(where: { $0.0 == i }) {
                    handBack.append((i, MOSQ_ERR_SUCCESS.rawValue))
                }
            }
            handOver(handBack)
            if stopping, !waiting { break }

            // At load, let more arrive before polling: a turn starts at most once a spacing
            // (not while work waits).
            if turnSpacing > .zero, !waiting, !stopping, ContinuousClock.now - lastWake < turnSpacing {
                let until = min(lastWake + turnSpacing, nextTimer ?? .now + turnSpacing)
                let nap = until - ContinuousClock.now
                if nap > .microseconds(20) { Self.sleep(nap) }
            }

            // Poll: the wake eventfd and each client's socket, until the next timer (to the
            // microsecond, ppoll: a timer 300 µs away is not rounded to a millisecond).
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
            for client in clients {
                let sock = mosquitto_socket(client.mosq)
                fds.append(pollfd(fd: sock, events: Int16(POLLIN) | (mosquitto_want_write(client.mosq) ? Int16(POLLOUT) : 0), revents: 0))
            }
            let timeout: Duration = shared.withLock { s in
                if !s.jobs.isEmpty || !s.attaching.isEmpty || !s.detaching.isEmpty || s.stopping { return .zero }
                guard let next = s.nextTimer else { return Self.idleTimeout }
                return max(.zero, min(Self.idleTimeout, next - ContinuousClock.now))
            }
            var wait = Self.timespec(timeout)
            let ready = fds.withUnsafeMutableBufferPointer { ppoll($0.baseAddress, nfds_t($0.count), &wait, nil) }
            // A wake: something to read, or a timer due (its turn does work). The idle
            // timeout is none: what arrives just after it is read at once.
            if ready > 0 || timeout < Self.idleTimeout { lastWake = ContinuousClock.now }
            guard ready > 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                var count: UInt64 = 0
                _ = read(wakeFD, &count, MemoryLayout<UInt64>.size)
                wakePending.store(false, ordering: .sequentiallyConsistent)
            }
            // Read every readable socket (callbacks run here and may enqueue jobs, which
            // the next turn runs before it writes).
            handBack.removeAll(keepingCapacity: true)
            for (i, client) in clients.enumerated() {
                let revents = fds[i + 1].revents
                // With TLS a handshake or renegotiation goes on in libmosquitto's read, also
                // when the socket is writable (as ClientCore.loopOnce does).
                let tlsWritable = revents & Int16(POLLOUT) != 0 && client.configuration.tls != nil
                if revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 || tlsWritable, client.driveRead() != MOSQ_ERR_SUCCESS.rawValue {
                    handBack.append((i, client.lastDriveCode))
                } else if revents & Int16(POLLOUT) != 0, client.driveWrite(corked: true) != MOSQ_ERR_SUCCESS.rawValue {
                    handBack.append((i, client.lastDriveCode))
                }
            }
            handOver(handBack)
        }
        // Hand every client back to its thread; one that attaches later is refused at
        // once (``attach(_:)``).
        let late = shared.withLock { s -> [ClientCore] in
            s.stopped = true
            defer { s.attaching.removeAll() }
            return s.attaching
        }
        for client in clients { client.loopFailed(MOSQ_ERR_SUCCESS.rawValue) }
        for client in late { client.loopFailed(MOSQ_ERR_CONN_LOST.rawValue) }
        clients.removeAll()
        threadId.store(0, ordering: .releasing)
    }

    /// The longest wait: the clients' keepalive and gates are looked at this often.
    static let idleTimeout = Duration.milliseconds(100)

    /// Lets go of the clients at these indices, each with its code.
    private func handOver(_ list: [(Int, Int32)]) {
        for (i, code) in list.sorted(by: { $0.0 > $1.0 }) {
            clients.remove(at: i).loopFailed(code)
        }
    }

    private static var currentThreadId: UInt { UInt(pthread_self()) }

    private static func sleep(_ duration: Duration) {
        var ts = timespec(duration)
        _ = nanosleep(&ts, nil)
    }

    private static func timespec(_ duration: Duration) -> Glibc.timespec {
        let (seconds, attoseconds) = duration.components
        return Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    }
}
