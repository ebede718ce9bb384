/// Remembered ids in 8 bytes each: a 48-bit digest of (user, id) and the minute the id
/// was first seen (the coordinator's `RememberedIds` stamps its horizon), packed in one
/// `UInt64`, kept sorted, with a directory on the digests' top bits so that a lookup
/// reads one short run (a million ids: 8 MB and a 256 KB directory,
/// where two strings per id as a dictionary key took about 100 MB).
///
/// A hit means "probably seen": two different ids share a digest with a chance of about
/// `count` / 2^48 per lookup (4 in a billion with a million ids), so the coordinator
/// confirms a hit in the store, off its pipeline. A miss is certain.
///
/// Digests live only in memory: the store's recovery read makes them from the stored
/// strings, in the same process as the lookups, with the standard library's `Hasher`
/// (SipHash, seeded anew in every process), so nobody can craft ids that collide with
/// another user's on purpose.
public struct IdDigests: Sendable {
    /// How finely the time an id was seen is kept: a minute (16 bits of them from the
    /// base: 45 days, well past the 48 hours ids are kept).
    public static let slotMs: Millis = 60_000

    /// `digest << 16 | slot`, the minute counted from `baseSlot` (saturating at 0xFFFF).
    private var values: [UInt64] = []
    private var isSorted = true
    /// The minute (since the Unix epoch) that a slot field of 0 stands for.
    private var baseSlot: Int64
    /// `values[directory[b] ..< directory[b + 1]]` hold the values whose top
    /// `directoryBits` bits are `b`.
    private var directory: [UInt32] = [0, 0]
    private var directoryBits = 0

    /// Empty; minutes are counted from the one `since` falls in (ids first seen before it
    /// count as seen then).
    public init(since: Millis) {
        baseSlot = Self.slot(of: since)
    }

    public var count: Int { values.count }
    public var isEmpty: Bool { values.isEmpty }

    // MARK: Digests

    /// 48 bits of the hash of the user id's bytes, 0xFF (which UTF-8 never holds) and the id's.
    public static func digest(user: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer) -> UInt64 {
        var hasher = Hasher()
        hasher.combine(bytes: user)
        hasher.combine(UInt8(0xFF))
        hasher.combine(bytes: id)
        return UInt64(UInt(bitPattern: hasher.finalize())) >> 16
    }

    public static func digest(user: String, id: String) -> UInt64 {
        var user = user
        var id = id
        return user.withUTF8 { u in id.withUTF8 { i in digest(user: UnsafeRawBufferPointer(u), id: UnsafeRawBufferPointer(i)) } }
    }

    static func slot(of time: Millis) -> Int64 {
        time >= 0 ? time / slotMs : (time + 1) / slotMs - 1
    }

    // MARK: Filling

    /// Adds one id; call ``seal()`` before looking anything up.
    public mutating func insert(digest: UInt64, seenAt: Millis) {
        let slots = min(max(Self.slot(of: seenAt) - baseSlot, 0), 0xFFFF)
        let value = digest << 16 | UInt64(slots)
        if let last = values.last, last > value { isSorted = false }
        values.append(value)
    }

    public mutating func insert(user: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer, seenAt: Millis) {
        insert(digest: Self.digest(user: user, id: id), seenAt: seenAt)
    }

    public mutating func reserveCapacity(_ n: Int) { values.reserveCapacity(n) }

    /// Sorts what was inserted and builds the directory: lookups may start.
    public mutating func seal() {
        if !isSorted {
            values.sort()
            isSorted = true
        }
        buildDirectory()
    }

    /// Adds `digests` (made by `digest(user:id:)`, each with when it was first seen) in
    /// one merge: O(count + digests.count).
    public mutating func merge(_ digests: [(digest: UInt64, seenAt: Millis)]) {
        guard !digests.isEmpty else { return }
        var more = IdDigests(since: baseSlot * Self.slotMs)
        more.reserveCapacity(digests.count)
        for d in digests { more.insert(digest: d.digest, seenAt: d.seenAt) }
        more.seal()
        if !isSorted { seal() }
        var merged: [UInt64] = []
        merged.reserveCapacity(values.count + more.values.count)
        var i = 0
        var j = 0
        while i < values.count, j < more.values.count {
            if values[i] <= more.values[j] {
                merged.append(values[i])
                i += 1
            } else {
                merged.append(more.values[j])
                j += 1
            }
        }
        merged.append(contentsOf: values[i...])
        merged.append(contentsOf: more.values[j...])
        values = merged
        buildDirectory()
    }

    /// Forgets the ids first seen in minutes that ended at or before `cutoff` (so an id
    /// is kept up to a minute longer than asked, never less), and counts minutes from
    /// there on.
    public mutating func forget(before cutoff: Millis) {
        let cutoffSlot = Self.slot(of: cutoff)
        guard cutoffSlot > baseSlot else { return }
        let shift = UInt64(min(cutoffSlot - baseSlot, 0xFFFF))
        var kept: [UInt64] = []
        kept.reserveCapacity(values.count)
        for value in values where value & 0xFFFF >= shift {
            kept.append(value - shift)
        }
        values = kept
        baseSlot = cutoffSlot
        buildDirectory()
    }

    // MARK: Looking up

    /// Whether an id with this digest was inserted (``seal()`` first).
    public func contains(digest: UInt64) -> Bool {
        precondition(isSorted, "IdDigests: seal() before looking up")
        let bucket = directoryBits == 0 ? 0 : Int((digest << 16) >> UInt64(64 - directoryBits))
        var i = Int(directory[bucket])
        let end = Int(directory[bucket + 1])
        while i < end {
            let d = values[i] >> 16
            if d == digest { return true }
            if d > digest { return false }
            i += 1
        }
        return false
    }

    public func contains(user: String, id: String) -> Bool {
        contains(digest: Self.digest(user: user, id: id))
    }

    /// A bucket of about 16 values per directory entry, at most 2^16 entries.
    private mutating func buildDirectory() {
        directoryBits = min(16, Int.bitWidth - (values.count / 16).leadingZeroBitCount)
        let buckets = 1 << directoryBits
        var directory = [UInt32](repeating: 0, count: buckets + 1)
        if directoryBits > 0 {
            for value in values { directory[Int(value >> UInt64(64 - directoryBits)) + 1] += 1 }
            for b in 0..<buckets { directory[b + 1] += directory[b] }
        } else {
            directory[1] = UInt32(values.count)
        }
        self.directory = directory
    }
}
