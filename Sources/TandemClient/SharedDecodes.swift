import Synchronization
import TandemCore

/// Room snapshots and changes decoded once for every ``TandemClient`` of a process that
/// reads the same message: tandem-web holds a client per signed-in person, and each of a
/// room's members' clients receives the same bytes of every change and snapshot from its
/// own MQTT connection. Given to each client (`TandemClient(...sharedDecodes:)`), the
/// first one to read a topic's message decodes it; the others find the same bytes and take
/// the value (a byte comparison, where decoding builds every sticker).
///
/// Keeps the last message of each snapshot topic and the last four of each changes topic
/// (``Memo/depth``), payloads and their values, dropped all at once past ``limit``
/// topics. A value is shared, never changed: each client applies it to a replica of its
/// own. `Sendable`: the tables are behind `Mutex`es.
public final class SharedDecodes: Sendable {
    /// At most this many topics are remembered (each table); past it, every entry goes.
    public var limit: Int { snapshots.limit }
    private let snapshots: Memo<RoomSnapshot>
    private let changes: Memo<RoomChanges>

    public init(limit: Int = 50_000) {
        // A snapshot is the whole room: only the latest of a topic is kept.
        snapshots = Memo(limit: limit, depth: 1)
        changes = Memo(limit: limit, depth: 4)
    }

    /// How many payloads were decoded (not found): for tests.
    var decoded: Int { snapshots.decoded.load(ordering: .relaxed) + changes.decoded.load(ordering: .relaxed) }

    func roomSnapshot(_ message: TransportMessage) throws(Rejection) -> RoomSnapshot {
        try snapshots.value(message) { (bytes) throws(Rejection) in try RoomSnapshot.decode(bytes) }
    }

    func roomChanges(_ message: TransportMessage) throws(Rejection) -> RoomChanges {
        try changes.value(message) { (bytes) throws(Rejection) in try RoomChanges.decode(bytes) }
    }

    final class Memo<Value: Sendable>: Sendable {
        let limit: Int
        /// Payloads kept per topic.
        let depth: Int
        /// The last few payloads of each topic, newest first, and their values: a client
        /// that is behind reads the message before the newest.
        let table = Mutex<[String: [(payload: [UInt8], value: Value)]]>([:])
        /// One held while a topic's message is decoded (the topic's hash picks which): a
        /// room's members read the same message at nearly the same moment on different
        /// threads, and without it several of them decoded it (2.6 decodes a change,
        /// measured with five members at 2,000 changes a second). Sixteen, so that other
        /// rooms' decodes seldom wait on it.
        let decoding: [DecodeLock] = (0..<16).map { _ in DecodeLock() }
        let decoded = Atomic<Int>(0)

        final class DecodeLock: Sendable {
            let mutex = Mutex<Void>(())
        }

        init(limit: Int, depth: Int) {
            self.limit = limit
            self.depth = max(1, depth)
        }

        /// The value of `message`'s bytes: the one kept for its topic when the bytes are the
        /// same, else decoded (by one reader at a time, outside the table's lock) and kept.
        func value(_ message: TransportMessage, decode: ([UInt8]) throws(Rejection) -> Value) throws(Rejection) -> Value {
            if let value = kept(message) { return value }
            return try decoding[message.topic.hashValue & (decoding.count - 1)].mutex.withLock { _ throws(Rejection) -> Value in
                // Another reader may have decoded it while this one waited.
                if let value = kept(message) { return value }
                let value = try decode(message.payload)
                decoded.add(1, ordering: .relaxed)
                table.withLock { table in
                    if table.count >= limit, table[message.topic] == nil { table.removeAll(keepingCapacity: true) }
                    var entries = table.removeValue(forKey: message.topic) ?? []
                    if entries.count >= depth { entries.removeLast() }
                    entries.insert((message.payload, value), at: 0)
                    table[message.topic] = entries
                }
                return value
            }
        }

        private func kept(_ message: TransportMessage) -> Value? {
            table.withLock { table in
                table[message.topic]?.first { $0.payload == message.payload }?.value
            }
        }
    }
}
