/// A room's persisted body in the binary format (format 2): what `RoomState` holds,
/// including tombstones and lease deadlines, in about a fifth of the JSON's bytes, and
/// read back without a JSON tree. Rows written before it (format 1, JSON) are still
/// read (`RoomState.init(persistedBytes:)` tells them apart by their first byte).
///
/// ```
/// 0x00 2                              marker (never "{") and format
/// roomId  version  updatedAt          string, uvarint, zigzag varint
/// n  name × n                         images and user ids, each once, in first use order
/// n  sticker × n                      in creation order:
///    id  flags  image  [owner]  createdBy  updatedBy  x y width height  updatedAt - room's  [lease]
/// n  tombstone × n                    sorted by their UTF-8 bytes
/// ```
/// A string is its UTF-8 length (uvarint) and bytes; a name is its index in the table.
/// `flags`: bits 0-3 say which frame numbers are 8 raw bytes (IEEE 754, little-endian)
/// rather than a zigzag varint (integers below 2^53, not -0), bit 4 an owner, bit 5 a
/// lease deadline (zigzag varint). The same state always gives the same bytes.
enum RoomBody {
    static let marker: UInt8 = 0
    static let format: UInt8 = 2

    static let ownerFlag: UInt8 = 1 << 4
    static let leaseFlag: UInt8 = 1 << 5

    static func encode(_ room: RoomState) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + room.stickerCount * 24 + room.tombstones.count * 12)
        out.append(marker)
        out.append(format)
        out.appendString(room.roomId)
        out.appendVarint(UInt64(bitPattern: room.version))
        out.appendZigzag(room.updatedAt)

        // One pass over the stickers: their bytes into `body`, the names they use into the
        // table (found by a short linear search: a room uses few distinct images and
        // users; a dictionary once there are many), then the table before the stickers.
        var names = NameTable()
        var body: [UInt8] = []
        body.reserveCapacity(room.stickerCount * 24)
        room.forEachLive { sticker, lease in
            body.appendString(sticker.id)
            let f = sticker.frame
            var flags: UInt8 = 0
            if !Self.isCompact(f.x) { flags |= 1 }
            if !Self.isCompact(f.y) { flags |= 2 }
            if !Self.isCompact(f.width) { flags |= 4 }
            if !Self.isCompact(f.height) { flags |= 8 }
            if sticker.owner != nil { flags |= ownerFlag }
            if lease != nil { flags |= leaseFlag }
            body.append(flags)
            body.appendVarint(names.index(of: sticker.image))
            if let owner = sticker.owner { body.appendVarint(names.index(of: owner)) }
            body.appendVarint(names.index(of: sticker.createdBy))
            body.appendVarint(names.index(of: sticker.updatedBy))
            body.appendNumber(f.x, raw: flags & 1 != 0)
            body.appendNumber(f.y, raw: flags & 2 != 0)
            body.appendNumber(f.width, raw: flags & 4 != 0)
            body.appendNumber(f.height, raw: flags & 8 != 0)
            body.appendZigzag(sticker.updatedAt &- room.updatedAt)
            if let lease { body.appendZigzag(lease) }
        }
        out.appendVarint(UInt64(names.names.count))
        for n in names.names { out.appendString(n) }
        out.appendVarint(UInt64(room.stickerCount))
        out.append(contentsOf: body)

        let tombstones = room.tombstones.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        out.appendVarint(UInt64(tombstones.count))
        for id in tombstones { out.appendString(id) }
        return out
    }

    /// The names a body uses, each once, in first use order.
    struct NameTable {
        var names: [String] = []
        var index: [String: UInt64] = [:]

        mutating func index(of name: String) -> UInt64 {
            if names.count <= 16 {
                for (i, n) in names.enumerated() where n == name { return UInt64(i) }
            } else if let i = index[name] {
                return i
            }
            names.append(name)
            if names.count == 17 {
                for (i, n) in names.enumerated() { index[n] = UInt64(i) }
            } else if names.count > 17 {
                index[name] = UInt64(names.count - 1)
            }
            return UInt64(names.count - 1)
        }
    }

    /// Whether a frame number is written as a zigzag varint: an integer that converts to
    /// `Int64` and back exactly, and not -0 (whose sign the integer would lose).
    static func isCompact(_ value: Double) -> Bool {
        value.rounded(.towardZero) == value && abs(value) < 9_007_199_254_740_992 && !(value == 0 && value.sign == .minus)
    }

    /// What a body holds, read in one pass; `sticker` is called for each sticker in
    /// creation order with its lease deadline, before the tombstones are read.
    struct Header {
        var roomId: String
        var version: Int64
        var updatedAt: Millis
        var stickerCount: Int
    }

    static func read(
        _ bytes: [UInt8], header: (Header) throws(RoomState.PersistenceError) -> Void = { _ in },
        sticker: (Sticker, Millis?) throws(RoomState.PersistenceError) -> Void,
        tombstone: (String) throws(RoomState.PersistenceError) -> Void
    ) throws(RoomState.PersistenceError) {
        var reader = ByteReader(bytes)
        guard try reader.byte() == marker else { throw .init("not a binary room body") }
        let format = try reader.byte()
        guard format == Self.format else { throw .init("format \(format) is not \(Self.format)") }
        let roomId = try reader.string()
        let version = Int64(bitPattern: try reader.varint())
        guard version >= 0 else { throw .init("version is negative") }
        let updatedAt = try reader.zigzag()

        let nameCount = try reader.count(atLeast: 1)
        var names: [String] = []
        names.reserveCapacity(nameCount)
        for _ in 0..<nameCount { names.append(try reader.string()) }
        func name() throws(RoomState.PersistenceError) -> String {
            let i = try reader.varint()
            guard i < UInt64(names.count) else { throw .init("name \(i) is not in the table of \(names.count)") }
            return names[Int(i)]
        }

        let stickerCount = try reader.count(atLeast: 3 + 4)
        guard version > 0 || stickerCount == 0 else { throw .init("a room at version 0 has no stickers") }
        try header(Header(roomId: roomId, version: version, updatedAt: updatedAt, stickerCount: stickerCount))
        for _ in 0..<stickerCount {
            let id = try reader.string()
            let flags = try reader.byte()
            guard flags & ~(ownerFlag | leaseFlag | 0x0F) == 0 else { throw .init("sticker \(id): unknown flags \(flags)") }
            let image = try name()
            let owner = flags & ownerFlag != 0 ? try name() : nil
            let createdBy = try name()
            let updatedBy = try name()
            let frame = Frame(
                x: try reader.number(raw: flags & 1 != 0), y: try reader.number(raw: flags & 2 != 0),
                width: try reader.number(raw: flags & 4 != 0), height: try reader.number(raw: flags & 8 != 0))
            let stickerUpdatedAt = updatedAt &+ (try reader.zigzag())
            let lease = flags & leaseFlag != 0 ? try reader.zigzag() : nil
            guard (owner != nil) == (lease != nil) else {
                throw .init("sticker \(id): a lock needs a lease and a lease needs a lock")
            }
            try sticker(Sticker(
                id: id, image: image, frame: frame,
                owner: owner, createdBy: createdBy, updatedBy: updatedBy, updatedAt: stickerUpdatedAt), lease)
        }
        let tombstoneCount = try reader.count(atLeast: 1)
        guard version > 0 || tombstoneCount == 0 else { throw .init("a room at version 0 has no stickers") }
        for _ in 0..<tombstoneCount { try tombstone(try reader.string()) }
        guard reader.isAtEnd else { throw .init("\(reader.remaining) bytes after the tombstones") }
    }
}

extension [UInt8] {
    mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(v))
    }

    mutating func appendZigzag(_ value: Int64) {
        appendVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    mutating func appendFixed(_ value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    /// A frame number: 8 raw bytes, or (`raw` false: see `RoomBody.isCompact`) a zigzag varint.
    mutating func appendNumber(_ value: Double, raw: Bool) {
        if raw {
            appendFixed(value.bitPattern)
        } else {
            appendZigzag(Int64(value))
        }
    }

    mutating func appendString(_ value: String) {
        appendVarint(UInt64(value.utf8.count))
        append(contentsOf: value.utf8)
    }
}

/// Reads what the `append...` writers above wrote, refusing to run past the end.
struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    mutating func byte() throws(RoomState.PersistenceError) -> UInt8 {
        guard offset < bytes.count else { throw .init("truncated at byte \(offset)") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func varint() throws(RoomState.PersistenceError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64, shift < 63 || b <= 1 else { throw .init("a number overflows 64 bits at byte \(offset)") }
            value |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return value }
            shift += 7
        }
    }

    mutating func zigzag() throws(RoomState.PersistenceError) -> Int64 {
        let v = try varint()
        return Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
    }

    mutating func fixed() throws(RoomState.PersistenceError) -> UInt64 {
        guard remaining >= 8 else { throw .init("truncated at byte \(offset)") }
        var value: UInt64 = 0
        for i in 0..<8 { value |= UInt64(bytes[offset + i]) << UInt64(8 * i) }
        offset += 8
        return value
    }

    mutating func number(raw: Bool) throws(RoomState.PersistenceError) -> Double {
        raw ? Double(bitPattern: try fixed()) : Double(try zigzag())
    }

    /// A count of items that take at least `atLeast` bytes each: refused when the rest
    /// of the body could not hold them (so a corrupt count never reserves gigabytes).
    mutating func count(atLeast: Int) throws(RoomState.PersistenceError) -> Int {
        let n = try varint()
        guard n <= UInt64(remaining / atLeast) else { throw .init("a count of \(n) does not fit in \(remaining) bytes") }
        return Int(n)
    }

    mutating func string() throws(RoomState.PersistenceError) -> String {
        let n = try count(atLeast: 1)
        defer { offset += n }
        return String(decoding: bytes[offset..<offset + n], as: UTF8.self)
    }
}
