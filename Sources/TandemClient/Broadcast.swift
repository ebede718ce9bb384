/// Values handed to every listener, owned by one actor: each new listener first gets
/// what it should start from (by default the latest value, if any), then every value
/// sent after.
struct Broadcast<Value: Sendable>: Sendable {
    private var listeners: [AsyncStream<Value>.Continuation] = []
    private let buffering: AsyncStream<Value>.Continuation.BufferingPolicy
    private(set) var current: Value?

    /// - Parameter buffering: what a listener that falls behind keeps. The latest state
    ///   of something can drop what it no longer needs (the default); a stream whose
    ///   every element says something (a receipt, a change) must not.
    init(buffering: AsyncStream<Value>.Continuation.BufferingPolicy = .bufferingNewest(64)) {
        self.buffering = buffering
    }

    /// A new listener's stream, starting with `first` (nil: the latest value, if any).
    mutating func listen(first: [Value]? = nil) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: buffering)
        listeners.append(continuation)
        for value in first ?? current.map({ [$0] }) ?? [] { continuation.yield(value) }
        return stream
    }

    mutating func send(_ value: Value) {
        current = value
        for continuation in listeners { continuation.yield(value) }
    }

    /// Ends every listener's stream.
    mutating func finish() {
        for continuation in listeners { continuation.finish() }
        listeners.removeAll()
    }
}
