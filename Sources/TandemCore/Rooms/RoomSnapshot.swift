/// The full state of a room, retained on `rooms/{roomId}/state`.
public struct RoomSnapshot: Sendable, Equatable {
    public var roomId: String
    public var epoch: String
    public var version: Int64
    public var updatedAt: Millis
    /// The members in the order they joined (the owner among them). Empty in a snapshot
    /// from a coordinator that predates membership.
    public var members: [RoomMember]
    /// In creation order.
    public var stickers: [Sticker]

    public init(roomId: String, epoch: String, version: Int64, updatedAt: Millis, members: [RoomMember] = [], stickers: [Sticker]) {
        self.roomId = roomId
        self.epoch = epoch
        self.version = version
        self.updatedAt = updatedAt
        self.members = members
        self.stickers = stickers
    }

    public var owner: String? { members.first { $0.role == .owner }?.userId }

    /// `{"roomId","epoch","version","updatedAt","owner","members":[...],"stickers":[...]}`.
    public func json() -> JSON {
        .obj([
            "roomId": .string(roomId),
            "epoch": .string(epoch),
            "version": .int(version),
            "updatedAt": .int(updatedAt),
            "owner": JSON(owner),
            "members": .array(members.map { $0.json() }),
            "stickers": .array(stickers.map { $0.json() }),
        ])
    }

    /// Reads a snapshot the coordinator published (no size limit: snapshots are outbound).
    public static func decode(_ bytes: some Collection<UInt8>) throws(Rejection) -> RoomSnapshot {
        do {
            return try RoomSnapshot(json: JSON.parse(bytes))
        } catch let error as Rejection {
            throw error
        } catch {
            throw .invalid("\(error)")
        }
    }

    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("snapshot must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        roomId = try reader.string("roomId")
        epoch = try reader.string("epoch")
        version = try reader.int64("version")
        updatedAt = reader.has("updatedAt") ? try reader.int64("updatedAt") : 0
        var members: [RoomMember] = []
        if case .array(let items)? = json["members"] {
            for item in items { members.append(try RoomMember(json: item)) }
        }
        self.members = members
        guard case .array(let items)? = json["stickers"] else { throw .invalid("stickers must be an array") }
        var stickers: [Sticker] = []
        stickers.reserveCapacity(items.count)
        for item in items {
            stickers.append(try Sticker(json: item))
        }
        self.stickers = stickers
    }
}

extension RoomState {
    /// The snapshot to publish, under the database's epoch.
    public func snapshot(epoch: String) -> RoomSnapshot {
        RoomSnapshot(roomId: roomId, epoch: epoch, version: version, updatedAt: updatedAt, members: members.list, stickers: stickers)
    }
}
