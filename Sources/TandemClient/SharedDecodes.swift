import Synchronization
import TandemCore

/// Room snapshots and changes decoded once for every ``TandemClient`` of a process that
/// reads the same message: tandem-web holds a client per signed-in person, and each of a
/// room's members' clients receives the same bytes of every change and snapshot from its
/// own MQTT connection. Given to each client (`TandemClient(...sharedDecodes:)`), the
/// first one to read a topic's message decodes it; the others find the same bytes and take
/// the value (a byte comparison, where decoding builds every sticker).
///
/// Keeps the last message of each topic: one payload and its value per room, dropped all
/// at once past ``limit`` topics. A value is shared, never changed: each client applies it
/// to a replica of its own. `Sendable`: the tables are behind `Mutex`es.
public final class SharedDecodes: Sendable {
    /// At most this many topics are remembered (each table); past it, every entry goes.
    public var limit: Int { snapshots.limit }
    private let snapshots: Memo<RoomSnapshot>
    private let changes: Memo<RoomChanges>

    public init(limit: Int = 50_000) {
        snapshots = Memo(limit: limit)
        changes = Memo(limit: limit)
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
        let table = Mutex<[String: (payload: [UInt8], value: Value)]>([:])
        let decoded = Atomic<Int>(0)

        init(limit: Int) { self.limit = limit }

        /// The value of `message`'s bytes: the one kept for its topic when the bytes are the
        /// same, else decoded (outside the lock) and kept.
        func value(_ message: TransportMessage, decode: ([UInt8]) throws(Rejection) -> Value) throws(Rejection) -> Value {
            if let kept = table.withLock({ $0[message.topic] }), kept.payload == message.payload { return kept.value }
            let value = try decode(message.payload)
            decoded.add(1, ordering: .relaxed)
            table.withLock { table in
                if table.count >= limit, table[message.topic] == nil { table.removeAll(keepingCapacity: true) }
                table[message.topic] = (message.payload, value)
            }
            return value
        }
    }
}
