/// The changes of one batch, published (not retained) on `rooms/{roomId}/changes`
/// before the batch's snapshot. A client at `fromVersion` applies it; on a gap it waits
/// for the snapshot.
public struct RoomChanges: Sendable, Equatable {
    public var roomId: String
    public var epoch: String
    /// The version before the first change.
    public var fromVersion: Int64
    /// The version after the last change.
    public var toVersion: Int64
    public var changes: [RoomChange]

    public init(roomId: String, epoch: String, fromVersion: Int64, toVersion: Int64, changes: [RoomChange]) {
        self.roomId = roomId
        self.epoch = epoch
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.changes = changes
    }

    /// The message for consecutive changes of one batch (versions as `RoomState` made
    /// them); nil when there are none.
    public init?(roomId: String, epoch: String, changes: [RoomChange]) {
        guard let first = changes.first, let last = changes.last else { return nil }
        self.init(roomId: roomId, epoch: epoch, fromVersion: first.version - 1, toVersion: last.version, changes: changes)
    }

    /// `{"roomId","epoch","fromVersion","toVersion","changes":[...]}`.
    public func json() -> JSON {
        .obj([
            "roomId": .string(roomId),
            "epoch": .string(epoch),
            "fromVersion": .int(fromVersion),
            "toVersion": .int(toVersion),
            "changes": .array(changes.map { $0.json() }),
        ])
    }

    /// Reads a RoomChanges the coordinator published.
    public static func decode(_ bytes: some Collection<UInt8>) throws(Rejection) -> RoomChanges {
        do {
            return try RoomChanges(json: JSON.parse(bytes))
        } catch let error as Rejection {
            throw error
        } catch {
            throw .invalid("\(error)")
        }
    }

    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("changes must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        roomId = try reader.string("roomId")
        epoch = try reader.string("epoch")
        fromVersion = try reader.int64("fromVersion")
        toVersion = try reader.int64("toVersion")
        guard case .array(let items)? = json["changes"] else { throw .invalid("changes must be an array") }
        var changes: [RoomChange] = []
        changes.reserveCapacity(items.count)
        for item in items {
            changes.append(try RoomChange(json: item))
        }
        self.changes = changes
    }
}
