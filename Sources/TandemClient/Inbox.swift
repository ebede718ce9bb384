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

/// An actor's inputs (a client's subscriptions' messages, its connection's edges and
/// the resend clock's ticks; what a tandem-web session and tab take from their client)
/// in one queue, with no task waiting on it: the first input into an empty queue starts
/// the owner's drain (``attach(_:)``), which takes them on the owner's actor until none
/// is left: a task that then ends, or, for a tab whose every input is put on its own
/// executor, a call there and then. An owner that nothing reaches holds no task, and
/// one that is reached takes a burst at once, in the order it came.
///
/// Why: a server holds a client per signed-in person (tandem-web), and a task waiting
/// on a stream keeps its frames, 2-4 KB: with a task per subscription, the connection's
/// events and a resend timer, that was most of a person's memory. `put` is called
/// from any thread (the transport's, another actor's) unless the owner's drain says
/// otherwise; the queue is behind a `Mutex`.
package final class Inbox<Input: Sendable>: Sendable {
    private struct State {
        var inputs: [Input] = []
        /// The owner's drain is taking the inputs (the next `put` starts none).
        var draining = false
        /// Inputs wait without being taken (``hold()``).
        var held = false
        var closed = false
        /// Starts taking the inputs (``attach(_:)``).
        var drain: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    package init() {}

    /// How the owner takes its inputs: `drain` starts a task that calls ``take()`` on the
    /// owner's actor, and handles what it gets, until it gets nothing; or, for an owner
    /// whose every put is made on its own executor (a tandem-web tab, on its client's,
    /// put into by the client's listeners), takes them there and then with
    /// `assumeIsolated`: such an owner's `put` and ``release()`` must then be called on
    /// that executor, or the process traps. Set once, by the owner (weakly held in
    /// `drain`: the queue does not keep its owner).
    package func attach(_ drain: @escaping @Sendable () -> Void) {
        state.withLock { $0.drain = drain }
    }

    /// Queues `input`; starts the owner's drain unless it runs. Nothing once closed.
    package func put(_ input: Input) {
        let drain: (@Sendable () -> Void)? = state.withLock { s in
            guard !s.closed else { return nil }
            s.inputs.append(input)
            guard !s.draining, !s.held, let drain = s.drain else { return nil }
            s.draining = true
            return drain
        }
        drain?()
    }

    /// Everything queued, oldest first; empty when nothing is (or the inputs are held),
    /// which ends the drain that asked (the next `put` or ``release()`` starts another).
    package func take() -> [Input] {
        state.withLock { s in
            if s.inputs.isEmpty || s.held || s.closed {
                s.draining = false
                return []
            }
            // Swapped out: an idle owner keeps no buffer.
            let inputs = s.inputs
            s.inputs = []
            return inputs
        }
    }

    /// Hands everything queued to `handle`, oldest first, until nothing is left: the body
    /// of an owner's drain task, run on the owner's actor (`isolation`). A `handle` that
    /// never suspends would do with ``take()`` in a loop of its own (``TandemClient``'s).
    package func drain(isolation: isolated (any Actor)? = #isolation, _ handle: (Input) async -> Void) async {
        while true {
            let inputs = take()
            if inputs.isEmpty { return }
            for input in inputs { await handle(input) }
        }
    }

    /// Inputs are queued and not taken until ``release()``: for an owner setting up
    /// what they concern (a tab that starts showing a room).
    package func hold() {
        state.withLock { $0.held = true }
    }

    /// Takes what was queued meanwhile, and what comes next.
    package func release() {
        let drain: (@Sendable () -> Void)? = state.withLock { s in
            s.held = false
            guard !s.closed, !s.inputs.isEmpty, !s.draining, let drain = s.drain else { return nil }
            s.draining = true
            return drain
        }
        drain?()
    }

    /// Drops what is queued and everything put from now on.
    package func close() {
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
        weak var inbox: Inbox<ClientInput>?
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
    func arm(_ inbox: Inbox<ClientInput>) {
        let start = state.withLock { s in
            s.armed[ObjectIdentifier(inbox)] = Armed(inbox: inbox)
            guard !s.ticking else { return false }
            s.ticking = true
            return true
        }
        guard start else { return }
        Task.detached { await self.tick() }
    }

    func disarm(_ inbox: Inbox<ClientInput>) {
        state.withLock { s in
            _ = s.armed.removeValue(forKey: ObjectIdentifier(inbox))
        }
    }

    private func tick() async {
        while true {
            try? await Task.sleep(for: interval)
            let inboxes = state.withLock { s -> [Inbox<ClientInput>]? in
                var inboxes: [Inbox<ClientInput>] = []
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
