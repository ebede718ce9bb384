/// The latest value of something watched, handed to every listener: each new listener
/// gets the current value first (if any), then every change. Owned by one actor.
struct Broadcast<Value: Sendable>: Sendable {
    private var listeners: [Int: AsyncStream<Value>.Continuation] = [:]
    private var nextKey = 0
    private(set) var current: Value?

    /// A new listener's stream and the key to remove it with.
    mutating func listen() -> (key: Int, stream: AsyncStream<Value>) {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(64))
        nextKey += 1
        listeners[nextKey] = continuation
        if let current { continuation.yield(current) }
        return (nextKey, stream)
    }

    mutating func remove(_ key: Int) {
        listeners.removeValue(forKey: key)
    }

    mutating func send(_ value: Value) {
        current = value
        for continuation in listeners.values { continuation.yield(value) }
    }

    mutating func finish() {
        for continuation in listeners.values { continuation.finish() }
        listeners.removeAll()
    }

    var isEmpty: Bool { listeners.isEmpty }
}
