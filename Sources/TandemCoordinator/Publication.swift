/// One message the coordinator sends, produced by the engine and sent by the service
/// once the batch it belongs to is committed.
public struct Publication: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    /// 0 or 1.
    public var qos: Int

    public init(topic: String, payload: [UInt8], retain: Bool = false, qos: Int = 1) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.qos = qos
    }
}
