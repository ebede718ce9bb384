import Synchronization

/// Values handed to every listener, owned by one actor: each new listener first gets
/// what it should start from (by default the latest value, if any), then every value
/// sent after. A listener is a stream (the public API), or a closure called on the
/// owner's actor (``Listening``: for a server that merges what its clients say into an
/// input of its own, with no task waiting on a stream).
struct Broadcast<Value: Sendable>: Sendable {
    private var listeners: [AsyncStream<Value>.Continuation] = []
    private var handlers: [Handler] = []
    private let buffering: AsyncStream<Value>.Continuation.BufferingPolicy
    /// Whether ``current`` is kept: not where every new listener is given what it starts
    /// from (`first`), and a value kept would only hold storage that its owner goes on
    /// to change (a copy of a room's replica in every update).
    private let keepsLatest: Bool
    private(set) var current: Value?

    private struct Handler: Sendable {
        let listening: Listening
        let deliver: @Sendable (Value) -> Void
    }

    /// - Parameter buffering: what a listener that falls behind keeps. The latest state
    ///   of something can drop what it no longer needs (the default); a stream whose
    ///   every element says something (a receipt, a change) must not.
    ///   `keepsLatest`: whether the latest value is kept for listeners that come later
    ///   (``current``).
    init(buffering: AsyncStream<Value>.Continuation.BufferingPolicy = .bufferingNewest(64), keepsLatest: Bool = true) {
        self.buffering = buffering
        self.keepsLatest = keepsLatest
    }

    /// A new listener's stream, starting with `first` (nil: the latest value, if any).
    mutating func listen(first: [Value]? = nil) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: buffering)
        listeners.append(continuation)
        for value in first ?? current.map({ [$0] }) ?? [] { continuation.yield(value) }
        return stream
    }

    /// A new listener that `deliver` is: called at once with `first` (nil: the latest
    /// value, if any), then with every value sent, on the owner's actor, until the
    /// returned ``Listening`` is stopped. It must return at once. Nothing marks
    /// ``finish()`` (it is simply called no more).
    mutating func listen(first: [Value]? = nil, deliver: @escaping @Sendable (Value) -> Void) -> Listening {
        let listening = Listening()
        for value in first ?? current.map({ [$0] }) ?? [] { deliver(value) }
        handlers.append(Handler(listening: listening, deliver: deliver))
        return listening
    }

    mutating func send(_ value: Value) {
        if keepsLatest { current = value }
        for continuation in listeners { continuation.yield(value) }
        guard !handlers.isEmpty else { return }
        handlers.removeAll { $0.listening.isStopped }
        for handler in handlers { handler.deliver(value) }
    }

    /// Changes `value`, the owner's own copy of what this broadcast sends, in place. The
    /// latest value kept for later listeners is a copy that shares `value`'s storage, and
    /// a change made to shared storage copies it whole (every sticker of a room, every
    /// message of a conversation, for each client that holds it): the kept copy is let go
    /// while `body` runs, and `value` kept after, changed or not (the owner sends it on
    /// when it changed). Nothing kept before, nothing kept after.
    mutating func change<Result>(_ value: inout Value, _ body: (inout Value) -> Result) -> Result {
        let kept = current != nil
        current = nil
        defer { if kept, keepsLatest { current = value } }
        return body(&value)
    }

    /// Ends every listener's stream, and calls no listener any more.
    mutating func finish() {
        for continuation in listeners { continuation.finish() }
        listeners.removeAll()
        handlers.removeAll()
    }
}

/// A listener given as a closure (``TandemClient/roomUpdates(_:deliver:)`` and the
/// others beside it): ``stop()`` and it is called no more.
package final class Listening: Sendable {
    private let stopped = Atomic<Bool>(false)

    init() {}

    /// From now on the closure is not called (one call already under way on the client's
    /// actor may still end).
    package func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
    }

    var isStopped: Bool { stopped.load(ordering: .sequentiallyConsistent) }
}
