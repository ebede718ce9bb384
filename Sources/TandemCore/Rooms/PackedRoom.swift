/// A room kept as its persisted body (`RoomBody`, a few bytes per sticker) until an
/// event needs it whole: a restart holds every room this way, and the coordinator
/// unpacks a room on its first event and packs it again once it has been idle a while.
///
/// Only a room that holds no lock is packed (a held lock has a lease deadline to watch),
/// so a packed room has nothing to expire. Its snapshot is written straight from the
/// body. The body was read whole once when packed (`init?(_:body:)`), so reading it
/// again cannot fail.
public struct PackedRoom: Sendable {
    public let roomId: String
    public let version: Int64
    public let updatedAt: Millis
    public let stickerCount: Int
    /// Its persisted body, the binary format: what the store holds for it.
    public let body: [UInt8]
    /// Its members (rows of their own in the store, not part of the body).
    public let members: RoomMembers

    /// Packs `room` with `body`, which must be `room.persistedBytes()` (pass it when it
    /// is at hand, e.g. the row it was read from); nil while the room holds a lock.
    public init?(_ room: RoomState, body: [UInt8]? = nil) {
        guard room.nextLeaseDeadline == nil else { return nil }
        roomId = room.roomId
        version = room.version
        updatedAt = room.updatedAt
        stickerCount = room.stickerCount
        members = room.members
        self.body = body ?? room.persistedBytes()
    }

    public var isClosed: Bool { version > 0 && members.isEmpty }

    /// The room whole again, as it was packed.
    public func unpacked() -> RoomState {
        do {
            var room = try RoomState(persistedBytes: body)
            room.restore(members: members)
            return room
        } catch {
            preconditionFailure("a packed room's body was read when it was packed: \(error)")
        }
    }

    /// The retained snapshot, byte for byte what `unpacked().snapshotBytes(epoch:)` gives.
    public func snapshotBytes(epoch: String) -> [UInt8] {
        var out = RoomState.snapshotHead(roomId: roomId, epoch: epoch, version: version, updatedAt: updatedAt, members: members, stickerCount: stickerCount)
        var first = true
        do {
            try RoomBody.read(body, sticker: { sticker, _ in
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                sticker.write(into: &out)
            }, tombstone: { _ in })
        } catch {
            preconditionFailure("a packed room's body was read when it was packed: \(error)")
        }
        out.append(contentsOf: "]}".utf8)
        return out
    }
}
