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

    /// The message's bytes: `json().serialized()`, except that a restore's whole list of
    /// stickers is written straight into them (a restore of 1,000 stickers would
    /// otherwise build a JSON tree of 8,000 values for one message).
    public func serialized() -> [UInt8] {
        guard changes.contains(where: { $0.type == .restore }) else { return json().serialized() }
        var head = self
        head.changes = []
        var out = head.json().serialized()
        // `..."changes":[]}`: the changes go before its last two bytes.
        out.removeLast(2)
        for (index, change) in changes.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            guard change.type == .restore, let stickers = change.stickers else {
                out.append(contentsOf: change.json().serialized())
                continue
            }
            var bare = change
            bare.stickers = []
            var bytes = bare.json().serialized()
            // `..."stickers":[]}`: the stickers go before its last two bytes.
            bytes.removeLast(2)
            out.append(contentsOf: bytes)
            for (i, sticker) in stickers.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                sticker.write(into: &out)
            }
            out.append(contentsOf: "]}".utf8)
        }
        out.append(contentsOf: "]}".utf8)
        return out
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
