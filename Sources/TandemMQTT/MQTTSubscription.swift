/// Messages on the filters of one `subscribe` call, in the order the broker sent them.
/// When the consumer stops iterating (or drops the sequence), the filters are
/// unsubscribed unless another subscription still uses them.
public struct MQTTSubscription: AsyncSequence, Sendable {
    public typealias Element = MQTTMessage
    let stream: AsyncThrowingStream<MQTTMessage, any Error>

    public func makeAsyncIterator() -> AsyncThrowingStream<MQTTMessage, any Error>.AsyncIterator {
        stream.makeAsyncIterator()
    }
}
