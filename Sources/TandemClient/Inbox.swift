import Synchronization
import TandemCore

/// What a ``TandemClient`` takes in, in the order it came.
enum ClientInput: Sendable {
    /// A message of one of its subscriptions, and what takes it on the client's actor.
    case message(TransportMessage, @Sendable (isolated TandemClient, TransportMessage) -> Void)
    /// An edge of the connection.
    case event(TransportEvent)
    /// The resend clock's second (``ResendClock``): what waited too long for its
    /// receipt goes again.
    case resendTick
}

/// A client's inputs (every subscription's messages, the connection's edges, the
/// resend clock's ticks) in one queue, with no task waiting on it: the first input into
/// an empty queue starts a task that takes them on the client's actor until none is
/// left, and ends. A client that nothing reaches holds no task, and one that is
/// reached takes a burst in one task, in the order it came.
///
/// Why: a server holds a client per signed-in person (tandem-web), and a task waiting
/// on a stream keeps its frames, 2-4 KB: with a task per subscription, the connection's
/// events and a resend timer, that was most of a person's memory. `put` is called
/// from the transport's thread (the MQTT loop); the queue is behind a `Mutex`.
final class Inbox: Sendable {
    private struct State {
        var inputs: [ClientInput] = []
        /// A task is taking the inputs (the next `put` starts none).
        var draining = false
        var closed = false
        weak var client: TandemClient?
    }

    private let state = Mutex(State())

    /// The client whose actor takes the inputs (set once, by it).
    func attach(_ client: TandemClient) {
        state.withLock { $0.client = client }
    }

    /// Queues `input`; starts the task that takes it unless one runs. Nothing once closed
    /// (or once the client is gone).
    func put(_ input: ClientInput) {
        let start: TandemClient? = state.withLock { s in
            guard !s.closed, let client = s.client else { return nil }
            s.inputs.append(input)
            guard !s.draining else { return nil }
            s.draining = true
            return client
        }
        guard let start else { return }
        // Detached: no task-local values copied into it.
        Task.detached { await start.takeInputs() }
    }

    /// Everything queued, oldest first; empty when nothing is, which ends the task that
    /// asked (the next `put` starts another).
    func take() -> [ClientInput] {
        state.withLock { s in
            if s.inputs.isEmpty {
                s.draining = false
                return []
            }
            // Swapped out: an idle client keeps no buffer.
            let inputs = s.inputs
            s.inputs = []
            return inputs
        }
    }

    /// Drops what is queued and everything put from now on.
    func close() {
        state.withLock { s in
            s.closed = true
            s.inputs = []
        }
    }
}

/// One clock for the resends of every client of the process: once a second it puts a
/// ``ClientInput/resendTick`` into the inbox of each client that has something waiting
/// for its receipt (``arm(_:)``; a client with nothing pending is not woken). Its task
/// runs only while some client is armed. A client used to sleep in a task of its own
/// for this, one per signed-in person in tandem-web.
final class ResendClock: Sendable {
    static let shared = ResendClock(interval: .seconds(1))

    private struct Armed {
        weak var inbox: Inbox?
    }

    private struct State {
        var armed: [ObjectIdentifier: Armed] = [:]
        var ticking = false
    }

    let interval: Duration
    private let state = Mutex(State())

    init(interval: Duration) {
        self.interval = interval
    }

    /// `inbox` gets a tick every `interval` until ``disarm(_:)`` (or until it is gone).
    func arm(_ inbox: Inbox) {
        let start = state.withLock { s in
            s.armed[ObjectIdentifier(inbox)] = Armed(inbox: inbox)
            guard !s.ticking else { return false }
            s.ticking = true
            return true
        }
        guard start else { return }
        Task.detached { await self.tick() }
    }

    func disarm(_ inbox: Inbox) {
        state.withLock { s in
            _ = s.armed.removeValue(forKey: ObjectIdentifier(inbox))
        }
    }

    private func tick() async {
        while true {
            try? await Task.sleep(for: interval)
            let inboxes = state.withLock { s -> [Inbox]? in
                var inboxes: [Inbox] = []
                var gone: [ObjectIdentifier] = []
                inboxes.reserveCapacity(s.armed.count)
                for (key, armed) in s.armed {
                    if let inbox = armed.inbox { inboxes.append(inbox) } else { gone.append(key) }
                }
                for key in gone { s.armed[key] = nil }
                if inboxes.isEmpty { s.ticking = false }
                return inboxes.isEmpty ? nil : inboxes
            }
            guard let inboxes else { return }
            for inbox in inboxes { inbox.put(.resendTick) }
        }
    }
}
