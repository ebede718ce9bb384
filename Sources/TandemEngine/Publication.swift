import TandemCore

/// One message the coordinator sends, produced by the engine and sent by the service
/// once the batch it belongs to is committed.
public struct Publication: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    /// 0 or 1.
    public var qos: Int
    /// For a receipt: what it answers, for the service's timing and logs (never sent).
    public var answers: Answered?

    /// The message a receipt answers: who sent it, the receipt, when it arrived (the
    /// engine's `now` at ingest) and what it was about (room id, conversation, workout).
    public struct Answered: Sendable, Equatable {
        public var user: String
        public var receipt: Receipt
        public var arrivedAt: Millis
        public var target: String?
    }

    public init(topic: String, payload: [UInt8], retain: Bool = false, qos: Int = 1, answers: Answered? = nil) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.qos = qos
        self.answers = answers
    }
}
