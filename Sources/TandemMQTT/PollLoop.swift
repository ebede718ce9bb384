#if canImport(Glibc)
import Glibc
#endif
import CMosquitto
import CPoll
import Foundation
import Synchronization

/// One thread that does a consumer's work and its MQTT sessions' socket I/O, in turns:
/// wait (in `ppoll(2)` on an epoll set holding the sockets and an eventfd) for a socket,
/// the eventfd or the next timer; read every socket that is ready (libmosquitto's
/// callbacks run here); run the Swift jobs that were enqueued (it is a `SerialExecutor`,
/// and ``taskExecutor`` is its `TaskExecutor`: an actor that uses it, and a task that
/// prefers it, run on this thread); fire the timers that are due; write what was
/// queued, each socket that has something once. A busy loop then waits for what is
/// left of ``turnSpacing`` before it polls again, so that what arrives in the meantime
/// is taken in one wake: at load, one thread switch per turn instead of one per packet,
/// and the publications of a turn written back to back.
///
/// A turn costs what is ready, not how many sockets are attached: epoll says which
/// sockets are readable, and only the sessions that queued a packet (``ClientCore/kick()``)
/// or read one are written. Every client is looked at once each ``sweepInterval`` (its
/// keepalive, its gate, anything left to write): thousands of sessions (tandem-web holds
/// one per signed-in person) share one loop.
///
/// Connecting (which blocks in libmosquitto) and reconnecting happen on each client's
/// own thread, or, for a client made with an ``MQTTConnector``, on that connector's few
/// threads: a client attaches its socket here once connected (``MQTTClient`` with
/// `loop:`) and is handed back the code of a failed read or write.
///
/// `@unchecked Sendable`: the attached clients and the thread's own state are touched
/// only by the loop thread; what other threads reach (jobs, timers, attach requests,
/// clients that queued a packet) is behind `shared`, a `Mutex`.
public final class PollLoop: SerialExecutor, @unchecked Sendable {
    /// At load, the least time from one turn's wake to the next poll. Zero: poll again at once.
    public let turnSpacing: Duration
    /// Whether a client's write is corked (``ClientCore/driveWrite(corked:)``): worth its
    /// two more system calls where a session writes a batch a turn (the coordinator's),
    /// not where each writes a packet or two (tandem-web's: an acknowledgement, an edit).
    public let corksWrites: Bool
    /// How often every attached client is looked at (its keepalive, its gate, anything
    /// queued without a word to the loop): 100 ms by default, as a gate that closes must
    /// be seen soon (the coordinator's lease). A loop of thousands of sessions with no
    /// gate (tandem-web's) looks less often: the sweep is the one cost per session.
    public let sweepInterval: Duration
    public let name: String

    struct Timer {
        var at: ContinuousClock.Instant
        var body: @Sendable () -> Void
    }

    /// A job, and whether it came through ``taskExecutor`` (a task's own code, run on no
    /// actor) rather than as an actor's that uses the loop (run isolated to the loop).
    struct LoopJob {
        var job: UnownedJob
        var onTaskExecutor: Bool
    }

    struct Shared {
        var jobs: [LoopJob] = []
        var timers: [Timer] = []
        var attaching: [ClientCore] = []
        var detaching: [ObjectIdentifier] = []
        /// Clients that queued a packet from another thread: written in the next turn.
        var dirty: [ClientCore] = []
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
    /// The Swift jobs the loop has run (added once a pass over them): what a test reads
    /// to see that a task's code does not hop.
    let jobsRun = Atomic<Int>(0)
    /// The loop thread's id, once it runs (`pthread_self`).
    let threadId = Atomic<UInt>(0)
    let finished = DispatchSemaphore(value: 0)

    /// How many times a turn runs the jobs that its jobs enqueued before it goes on to
    /// the sockets: enough for a step, its commit and its publications (four), bounded so
    /// that a task that keeps enqueueing cannot keep the sockets waiting.
    static let passesPerTurn = 8

    /// The epoll set: the wake eventfd (data 0) and each attached client's socket (data:
    /// the client's slot, never reused, so that an event of a socket let go is ignored).
    let epollFD: Int32

    /// Loop-thread-only: the clients whose sockets it drives, by slot.
    private var clients: [UInt64: ClientCore] = [:]
    private var nextSlot: UInt64 = 1
    /// Loop-thread-only: the slots whose socket is watched for writability too (a write
    /// that did not finish).
    private var watchingWrite: Set<UInt64> = []
    /// Loop-thread-only: the clients to write this turn (they queued a packet on this
    /// thread, read one, or became writable).
    private var dirty: [ClientCore] = []

    /// Starts the loop's thread. `turnSpacing`, `corksWrites`: see them. Throws when the
    /// process has no file descriptor left for its wake-up eventfd or its epoll set.
    public init(
        name: String, turnSpacing: Duration = .microseconds(1000), corksWrites: Bool = true, sweepInterval: Duration = PollLoop.idleTimeout
    ) throws(MQTTError) {
        self.name = name
        self.turnSpacing = turnSpacing
        self.corksWrites = corksWrites
        self.sweepInterval = max(.milliseconds(1), sweepInterval)
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard fd >= 0 else {
            throw MQTTError(.library(code: MOSQ_ERR_ERRNO.rawValue), "eventfd failed for the loop \(name): \(String(cString: strerror(errno)))")
        }
        let ep = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard ep >= 0, cpoll_epoll_ctl(ep, Int32(EPOLL_CTL_ADD), fd, UInt32(EPOLLIN.rawValue), 0) == 0 else {
            let reason = String(cString: strerror(errno))
            if ep >= 0 { close(ep) }
            close(fd)
            throw MQTTError(.library(code: MOSQ_ERR_ERRNO.rawValue), "epoll failed for the loop \(name): \(reason)")
        }
        wakeFD = fd
        epollFD = ep
        let thread = Thread { [self] in run() }
        thread.name = name
        taskSide.loop.withLock { $0 = self }
        thread.start()
    }

    deinit {
        close(epollFD)
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
        enqueue(LoopJob(job: UnownedJob(job), onTaskExecutor: false))
    }

    func enqueue(_ job: LoopJob) {
        shared.withLock { $0.jobs.append(job) }
        wakeUp()
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// The loop as a task's preferred executor (`Task(executorPreference:)`): the task's
    /// own code runs on this thread as on no actor, so that its calls to other
    /// nonisolated async functions (an `AsyncStream`'s `next()`, a helper of the caller's)
    /// go on in place. Were it run isolated to the loop, as an actor's job is, each such
    /// call would be a hop off the loop's isolation: a job enqueued and run again, some
    /// eleven an event in the coordinator. A call to an actor that uses the loop (the
    /// SQLite writer) is a job to enter it and one to come back: two, where it was one
    /// (only the return) when the task's code ran isolated to the loop.
    ///
    /// One for the loop's life, so that every task that prefers the loop prefers the same
    /// executor. It holds the loop until the loop's thread ends; a job it is given after
    /// that never runs, as with the loop's own.
    public var taskExecutor: TaskSide { taskSide }

    private let taskSide = TaskSide()

    /// ``PollLoop/taskExecutor``.
    public final class TaskSide: TaskExecutor, Sendable {
        fileprivate let loop = Mutex<PollLoop?>(nil)

        public func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            loop.withLock { $0 }?.enqueue(LoopJob(job: job, onTaskExecutor: true))
        }

        public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
            UnownedTaskExecutor(ordinary: self)
        }
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

    /// `client` queued a packet (from any thread): it is written in this turn (on the loop
    /// thread) or the next one. At most once in the list until written.
    func markDirty(_ client: ClientCore) {
        guard !client.loopDirty.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if isOnLoopThread {
            dirty.append(client)
        } else {
            shared.withLock { $0.dirty.append(client) }
            wakeUp()
        }
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
        let task = taskSide.asUnownedTaskExecutor()
        var jobs: [LoopJob] = []
        var due: [Timer] = []
        var handBack: [(UInt64, Int32)] = []
        var readyData = [UInt64](repeating: 0, count: 256)
        var readyEvents = [UInt32](repeating: 0, count: 256)
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
                if !s.dirty.isEmpty {
                    dirty.append(contentsOf: s.dirty)
                    s.dirty.removeAll(keepingCapacity: true)
                }
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
            handBack.removeAll(keepingCapacity: true)
            for client in attaching { add(client) }
            if !jobs.isEmpty { jobsRun.add(jobs.count, ordering: .relaxed) }
            for entry in jobs {
                if entry.onTaskExecutor {
                    entry.job.runSynchronously(on: task)
                } else {
                    // An actor's job, with the loop's task side as the task executor: right
                    // for a task that prefers the loop (the coordinator's); one from a task
                    // that does not switches once more at its next call to an actor here.
                    entry.job.runSynchronously(isolatedTo: serial, taskExecutor: task)
                }
            }
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

            // Write what this turn queued, each socket that has something once.
            let now = ContinuousClock.now
            let sweep = now - lastMisc >= sweepInterval
            if sweep {
                // Every client once an idle timeout: keepalive, the gates, and a write
                // for anything queued without a word to the loop.
                lastMisc = now
                dirty.removeAll(keepingCapacity: true)
                for (slot, client) in clients {
                    client.loopDirty.store(false, ordering: .releasing)
                    if client.gateClosed {
                        handBack.append((slot, MOSQ_ERR_SUCCESS.rawValue))
                    } else if mosquitto_loop_misc(client.mosq) != MOSQ_ERR_SUCCESS.rawValue || mosquitto_socket(client.mosq) < 0 {
                        handBack.append((slot, MOSQ_ERR_CONN_LOST.rawValue))
                    } else {
                        write(client, slot: slot, into: &handBack)
                    }
                }
            } else {
                for client in dirty {
                    client.loopDirty.store(false, ordering: .releasing)
                    let slot = client.loopSlot
                    guard slot != 0, clients[slot] === client else { continue }
                    write(client, slot: slot, into: &handBack)
                }
                dirty.removeAll(keepingCapacity: true)
            }
            // Asked to let go (stopping, cut off): after the write, so that a DISCONNECT
            // queued by a shutdown has left. With it, in one look: whether anything
            // waits, and the next timer.
            let (detaching, stopping, waiting, nextTimer) = shared.withLock { s in
                defer { if !s.detaching.isEmpty { s.detaching.removeAll() } }
                return (s.detaching, s.stopping, !s.jobs.isEmpty || !s.attaching.isEmpty, s.nextTimer)
            }
            for id in detaching {
                if let (slot, _) = clients.first(where: { ObjectIdentifier($0.value) == id }), !handBack.contains(where: { $0.0 == slot }) {
                    handBack.append((slot, MOSQ_ERR_SUCCESS.rawValue))
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

            // Wait on the epoll set until the next timer (to the microsecond, ppoll on the
            // epoll descriptor: a timer 300 µs away is not rounded to a millisecond).
            let timeout: Duration = shared.withLock { s in
                if !s.jobs.isEmpty || !s.attaching.isEmpty || !s.detaching.isEmpty || !s.dirty.isEmpty || s.stopping { return .zero }
                guard let next = s.nextTimer else { return Self.idleTimeout }
                return max(.zero, min(Self.idleTimeout, next - ContinuousClock.now))
            }
            var wait = Self.timespec(timeout)
            var set = pollfd(fd: epollFD, events: Int16(POLLIN), revents: 0)
            let ready = ppoll(&set, 1, &wait, nil)
            // A wake: something to read, or a timer due (its turn does work). The idle
            // timeout is none: what arrives just after it is read at once.
            if ready > 0 || timeout < Self.idleTimeout { lastWake = ContinuousClock.now }
            guard ready > 0 else { continue }
            // Read every ready socket (callbacks run here and may enqueue jobs, which the
            // next turn runs before it writes); what a read queued (acknowledgements) is
            // written in the next turn.
            handBack.removeAll(keepingCapacity: true)
            let count = readyData.withUnsafeMutableBufferPointer { data in
                readyEvents.withUnsafeMutableBufferPointer { events in
                    cpoll_epoll_ready(epollFD, data.baseAddress, events.baseAddress, Int32(data.count))
                }
            }
            for i in 0..<Int(max(0, count)) {
                let slot = readyData[i], events = readyEvents[i]
                if slot == 0 {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, MemoryLayout<UInt64>.size)
                    wakePending.store(false, ordering: .sequentiallyConsistent)
                    continue
                }
                guard let client = clients[slot] else { continue }
                let readable = events & UInt32(EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0
                let writable = events & UInt32(EPOLLOUT.rawValue) != 0
                // With TLS a handshake or renegotiation goes on in libmosquitto's read, also
                // when the socket is writable (as ClientCore.loopOnce does).
                if readable || (writable && client.configuration.tls != nil) {
                    if client.driveRead() != MOSQ_ERR_SUCCESS.rawValue {
                        handBack.append((slot, client.lastDriveCode))
                        continue
                    }
                }
                markDirty(client)
            }
            handOver(handBack)
        }
        // Hand every client back to its thread; one that attaches later is refused at
        // once (``attach(_:)``).
        let late = shared.withLock { s -> [ClientCore] in
            s.stopped = true
            s.dirty.removeAll()
            defer { s.attaching.removeAll() }
            return s.attaching
        }
        dirty.removeAll()
        handOver(clients.keys.map { ($0, MOSQ_ERR_SUCCESS.rawValue) })
        for client in late { client.loopFailed(MOSQ_ERR_CONN_LOST.rawValue) }
        // What the task side held of the loop, let go (the loop is not kept alive by it).
        taskSide.loop.withLock { $0 = nil }
        threadId.store(0, ordering: .releasing)
    }

    /// Starts driving `client`'s socket: in the epoll set under a new slot, and written
    /// this turn (its CONNECT waits).
    private func add(_ client: ClientCore) {
        let sock = mosquitto_socket(client.mosq)
        let slot = nextSlot
        nextSlot += 1
        guard sock >= 0, cpoll_epoll_ctl(epollFD, Int32(EPOLL_CTL_ADD), sock, UInt32(EPOLLIN.rawValue), slot) == 0 else {
            client.loopFailed(MOSQ_ERR_CONN_LOST.rawValue)
            return
        }
        client.loopSlot = slot
        client.loopSocket = sock
        clients[slot] = client
        client.loopDirty.store(true, ordering: .releasing)
        dirty.append(client)
    }

    /// Writes what `client` queued; a write that could not finish has the socket watched
    /// for writability until it does.
    private func write(_ client: ClientCore, slot: UInt64, into handBack: inout [(UInt64, Int32)]) {
        guard client.driveWrite(corked: corksWrites) == MOSQ_ERR_SUCCESS.rawValue else {
            handBack.append((slot, client.lastDriveCode))
            return
        }
        let pending = mosquitto_want_write(client.mosq)
        guard pending != watchingWrite.contains(slot) else { return }
        let events = UInt32(EPOLLIN.rawValue) | (pending ? UInt32(EPOLLOUT.rawValue) : 0)
        _ = cpoll_epoll_ctl(epollFD, Int32(EPOLL_CTL_MOD), client.loopSocket, events, slot)
        if pending { watchingWrite.insert(slot) } else { watchingWrite.remove(slot) }
    }

    /// The longest wait: the clients' keepalive and gates are looked at this often.
    public static let idleTimeout = Duration.milliseconds(100)

    /// Lets go of the clients in these slots, each with its code (a slot listed twice
    /// is let go once).
    private func handOver(_ list: [(UInt64, Int32)]) {
        for (slot, code) in list {
            guard let client = clients.removeValue(forKey: slot) else { continue }
            watchingWrite.remove(slot)
            // The socket may be closed already (libmosquitto closes it on a failure), and
            // closing takes it out of the set; the descriptor may even be another's by now,
            // so only a socket still the client's is taken out.
            if mosquitto_socket(client.mosq) == client.loopSocket {
                _ = cpoll_epoll_ctl(epollFD, Int32(EPOLL_CTL_DEL), client.loopSocket, 0, 0)
            }
            client.loopSlot = 0
            client.loopSocket = -1
            client.loopFailed(code)
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
