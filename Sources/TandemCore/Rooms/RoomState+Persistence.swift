/// The room as one blob for the store: everything `RoomState` holds, including
/// tombstones and lease deadlines, so that a restart continues where it stopped.
extension RoomState {
    /// The store's blob could not be read back.
    public struct PersistenceError: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public init(_ message: String) { self.message = message }
        public var description: String { "unreadable room state: \(message)" }
    }

    /// The JSON format (1), which rows written before the binary one (`RoomBody`, 2) hold.
    public static let persistenceFormat: Int64 = 1

    /// The body the store keeps: the binary format (`RoomBody`), written straight into
    /// bytes. The same state always gives the same bytes.
    public func persistedBytes() -> [UInt8] {
        RoomBody.encode(self)
    }

    /// Restores a body of either format: binary (what `persistedBytes()` writes) or JSON
    /// (format 1, rows written by earlier versions), told apart by the first byte.
    public init(persistedBytes bytes: [UInt8]) throws(PersistenceError) {
        guard bytes.first != UInt8(ascii: "{") else {
            let json: JSON
            do { json = try JSON.parse(bytes) } catch { throw PersistenceError("\(error)") }
            try self.init(persisted: json)
            return
        }
        var roomId = ""
        var version: Int64 = 0
        var updatedAt: Millis = 0
        var stickers: [Sticker] = []
        var leases: [String: Millis] = [:]
        var tombstones = Set<String>()
        try RoomBody.read(bytes, header: { header in
            roomId = header.roomId
            version = header.version
            updatedAt = header.updatedAt
            stickers.reserveCapacity(header.stickerCount)
        }, sticker: { sticker, lease in
            stickers.append(sticker)
            if let lease { leases[sticker.id] = lease }
        }, tombstone: { id in
            tombstones.insert(id)
        })
        self.init(roomId: roomId, version: version, updatedAt: updatedAt, stickers: stickers, tombstones: tombstones, leaseDeadlines: leases)
        guard stickerCount == stickers.count else { throw PersistenceError("a sticker appears twice") }
        for id in tombstones where sticker(id) != nil { throw PersistenceError("sticker \(id) is both live and deleted") }
    }

    /// The JSON format (1): `{"format":1,"roomId","version","updatedAt","stickers":[...],
    /// "tombstones":[...], "leases":[{"stickerId","deadline"}]}`; tombstones sorted and
    /// leases in creation order, so the same state always gives the same bytes. No longer
    /// written by the coordinator; kept to read and make rows of that format.
    public func persisted() -> JSON {
        let live = stickersWithLeases
        var leases: [JSON] = []
        for (sticker, lease) in live {
            if let lease {
                leases.append(.obj(["stickerId": .string(sticker.id), "deadline": .int(lease)]))
            }
        }
        let sortedTombstones = tombstones.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return .obj([
            "format": .int(Self.persistenceFormat),
            "roomId": .string(roomId),
            "version": .int(version),
            "updatedAt": .int(updatedAt),
            "stickers": .array(live.map { $0.sticker.json() }),
            "tombstones": .array(sortedTombstones.map(JSON.string)),
            "leases": .array(leases),
        ])
    }

    /// Restores what `persisted()` wrote, checking that the parts agree (every owned
    /// sticker has a lease and only those, no id both live and deleted, no repeats).
    public init(persisted json: JSON) throws(PersistenceError) {
        do throws(Rejection) {
            let reader = PayloadReader(object: json)
            let format = try reader.int64("format")
            guard format == Self.persistenceFormat else { throw .invalid("format \(format) is not \(Self.persistenceFormat)") }
            let roomId = try reader.string("roomId")
            let version = try reader.int64("version")
            let updatedAt = try reader.int64("updatedAt")
            guard version >= 0 else { throw .invalid("version is negative") }

            var stickers: [Sticker] = []
            var ids = Set<String>()
            for item in try Self.array(json, "stickers") {
                let sticker = try Sticker(json: item)
                guard ids.insert(sticker.id).inserted else { throw .invalid("sticker \(sticker.id) appears twice") }
                stickers.append(sticker)
            }
            var tombstones = Set<String>()
            for item in try Self.array(json, "tombstones") {
                guard let id = item.stringValue else { throw .invalid("tombstones must hold strings") }
                guard !ids.contains(id) else { throw .invalid("sticker \(id) is both live and deleted") }
                tombstones.insert(id)
            }
            var leases: [String: Millis] = [:]
            for item in try Self.array(json, "leases") {
                let lease = PayloadReader(object: item)
                let id = try lease.string("stickerId")
                guard leases.updateValue(try lease.int64("deadline"), forKey: id) == nil else {
                    throw .invalid("sticker \(id) has two leases")
                }
            }
            for sticker in stickers where (sticker.owner != nil) != (leases[sticker.id] != nil) {
                throw .invalid("sticker \(sticker.id): a lock needs a lease and a lease needs a lock")
            }
            guard leases.count == stickers.count(where: { $0.owner != nil }) else {
                throw .invalid("a lease names a sticker that is not in the room")
            }
            guard version > 0 || (stickers.isEmpty && tombstones.isEmpty) else {
                throw .invalid("a room at version 0 has no stickers")
            }
            self.init(roomId: roomId, version: version, updatedAt: updatedAt, stickers: stickers, tombstones: tombstones, leaseDeadlines: leases)
        } catch {
            throw PersistenceError(error.message)
        }
    }

    private static func array(_ json: JSON, _ key: String) throws(Rejection) -> [JSON] {
        guard case .array(let items)? = json[key] else { throw .invalid("\(key) must be an array") }
        return items
    }
}
