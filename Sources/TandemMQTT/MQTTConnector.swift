import Dispatch
import Foundation
import Synchronization

/// A few threads that connect and reconnect the clients made with it, so that a process
/// with thousands of MQTT sessions (tandem-web: one per signed-in person) does not hold a
/// thread per session. With a ``PollLoop`` driving the connected sockets, the threads of
/// such a process are the loop's and the connector's, whatever the number of sessions.
///
/// A connect (libmosquitto's `mosquitto_connect_bind_v5`: a blocking TCP connect that
/// queues the CONNECT packet; the loop writes it and reads the CONNACK) is one job; a
/// client waiting to reconnect waits in a timer here, not in a sleeping thread. A connect
/// to a broker that does not answer blocks one thread until the system gives up, so the
/// others still take the next jobs; the clients then wait their turn.
///
/// `@unchecked Sendable`: the queue and the timers are behind `shared`, a `Mutex`; the
/// threads touch nothing else of it.
public final class MQTTConnector: @unchecked Sendable {
    public let name: String
    public let threadCount: Int

    struct Timer {
        var at: ContinuousClock.Instant
        var job: @Sendable () -> Void
    }

    struct Shared {
        /// Jobs in order; `head` is the next one (the array is compacted as it drains).
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        /// Sorted by deadline, soonest last (taken from the end).
        var timers: [Timer] = []
        var stopping = false
        var threadIds: Set<UInt> = []
    }

    let shared = Mutex(Shared())
    /// One signal per job submitted (and per stop); a thread waiting for a timer wakes
    /// at its deadline without one.
    let available = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)

    /// Starts `threads` threads (at least one).
    public init(name: String, threads: Int = 2) {
        self.name = name
        threadCount = max(1, threads)
        for index in 0..<threadCount {
            let thread = Thread { [self] in run() }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    /// Runs `job` on one of the threads, after the jobs submitted before it.
    func submit(_ job: @escaping @Sendable () -> Void) {
        shared.withLock { $0.jobs.append(job) }
        available.signal()
    }

    /// Runs `job` on one of the threads once `delay` seconds have passed.
    func schedule(after delay: Double, _ job: @escaping @Sendable () -> Void) {
        let at = ContinuousClock.now + .milliseconds(Int64(max(0, delay) * 1000))
        shared.withLock { s in
            let index = s.timers.firstIndex { $0.at <= at } ?? s.timers.endIndex
            s.timers.insert(Timer(at: at, job: job), at: index)
        }
        // A thread that waits for a later deadline (or none) looks again.
        available.signal()
    }

    /// Whether this is one of the connector's threads.
    var isOnConnectorThread: Bool {
        let id = UInt(pthread_self())
        return shared.withLock { $0.threadIds.contains(id) }
    }

    /// Ends the threads once the jobs queued so far have run; timers not yet due are
    /// dropped. Stop the clients first.
    public func stop() {
        shared.withLock { $0.stopping = true }
        for _ in 0..<threadCount { available.signal() }
    }

    /// Waits until every thread has ended (after ``stop()``). Never from one of them.
    public func waitUntilStopped() {
        precondition(!isOnConnectorThread, "waitUntilStopped() on a thread of the connector \(name)")
        for _ in 0..<threadCount { finished.wait() }
    }

    private func run() {
        let id = UInt(pthread_self())
        shared.withLock { _ = $0.threadIds.insert(id) }
        defer { finished.signal() }
        while true {
            enum Next { case run(@Sendable () -> Void), wait(ContinuousClock.Instant?), stop }
            let next = shared.withLock { s -> Next in
                let now = ContinuousClock.now
                while let last = s.timers.last, last.at <= now {
                    s.timers.removeLast()
                    s.jobs.append(last.job)
                }
                if s.head < s.jobs.count {
                    let job = s.jobs[s.head]
                    s.head += 1
                    if s.head == s.jobs.count {
                        s.jobs.removeAll(keepingCapacity: s.jobs.count <= 1024)
                        s.head = 0
                    } else if s.head >= 1024, s.head * 2 >= s.jobs.count {
                        s.jobs.removeFirst(s.head)
                        s.head = 0
                    }
                    return .run(job)
                }
                if s.stopping { return .stop }
                return .wait(s.timers.last?.at)
            }
            switch next {
            case .run(let job):
                job()
            case .stop:
                return
            case .wait(let deadline):
                if let deadline {
                    let left = deadline - ContinuousClock.now
                    let (seconds, attoseconds) = left.components
                    let nanoseconds = max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
                    _ = available.wait(timeout: .now() + .nanoseconds(Int(nanoseconds)))
                } else {
                    available.wait()
                }
            }
        }
    }
}
