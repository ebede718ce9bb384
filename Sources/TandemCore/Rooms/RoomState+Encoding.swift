/// The retained snapshot, on the hot path (every changed room, every batch), written
/// straight into bytes: byte for byte what `snapshot(epoch:).json()` gives (tests pin
/// it), without building a `JSON` tree and a `[Sticker]` copy first. (The persisted
/// body, the other serialisation of every changed room, is binary: `RoomBody`.)
extension RoomState {
    public func snapshotBytes(epoch: String) -> [UInt8] {
        var out = Self.snapshotHead(roomId: roomId, epoch: epoch, version: version, updatedAt: updatedAt, members: members, stickerCount: stickerCount)
        writeStickers(into: &out)
        out.append(contentsOf: "]}".utf8)
        return out
    }

    /// A snapshot up to its stickers' opening bracket; the stickers and `]}` follow.
    static func snapshotHead(roomId: String, epoch: String, version: Int64, updatedAt: Millis, members: RoomMembers, stickerCount: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + members.count * 64 + stickerCount * 192)
        out.append(contentsOf: #"{"roomId":"#.utf8)
        JSON.writeString(roomId, into: &out)
        out.append(contentsOf: #","epoch":"#.utf8)
        JSON.writeString(epoch, into: &out)
        out.append(contentsOf: #","version":"#.utf8)
        JSON.writeInteger(version, into: &out)
        out.append(contentsOf: #","updatedAt":"#.utf8)
        JSON.writeInteger(updatedAt, into: &out)
        out.append(contentsOf: #","owner":"#.utf8)
        if let owner = members.owner {
            JSON.writeString(owner, into: &out)
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: #","members":["#.utf8)
        for (index, member) in members.list.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"userId":"#.utf8)
            JSON.writeString(member.userId, into: &out)
            out.append(contentsOf: #","role":"#.utf8)
            JSON.writeString(member.role.rawValue, into: &out)
            out.append(contentsOf: #","since":"#.utf8)
            JSON.writeInteger(member.since, into: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: #"],"stickers":["#.utf8)
        return out
    }

    /// The live stickers, comma-separated, in creation order.
    private func writeStickers(into out: inout [UInt8]) {
        var first = true
        forEachLive { sticker, _ in
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            sticker.write(into: &out)
        }
    }
}

extension Sticker {
    /// The sticker as `json()` writes it, straight into `out`.
    public func write(into out: inout [UInt8]) {
        out.append(contentsOf: #"{"id":"#.utf8)
        JSON.writeString(id, into: &out)
        out.append(contentsOf: #","image":"#.utf8)
        JSON.writeString(image, into: &out)
        out.append(contentsOf: #","frame":{"x":"#.utf8)
        JSON.writeDouble(frame.x, into: &out)
        out.append(contentsOf: #","y":"#.utf8)
        JSON.writeDouble(frame.y, into: &out)
        out.append(contentsOf: #","width":"#.utf8)
        JSON.writeDouble(frame.width, into: &out)
        out.append(contentsOf: #","height":"#.utf8)
        JSON.writeDouble(frame.height, into: &out)
        out.append(contentsOf: #"},"owner":"#.utf8)
        if let owner {
            JSON.writeString(owner, into: &out)
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: #","createdBy":"#.utf8)
        JSON.writeString(createdBy, into: &out)
        out.append(contentsOf: #","updatedBy":"#.utf8)
        JSON.writeString(updatedBy, into: &out)
        out.append(contentsOf: #","updatedAt":"#.utf8)
        JSON.writeInteger(updatedAt, into: &out)
        out.append(UInt8(ascii: "}"))
    }
}
