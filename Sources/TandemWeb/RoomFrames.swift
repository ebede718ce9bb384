import NIOCore
import Synchronization
import TandemClient
import TandemCore

/// The `room` frames of the process, each written once per room version and person's
/// undo state: every tab showing a room gets the same bytes but for `canUndo` and
/// `canRedo` (the person's), so the first tab to write a version keeps its room part
/// here, and each of the four frames made from it (undo and redo, each true or false) is
/// kept as the buffer the sockets write: the tabs showing that version share it, with
/// nothing copied. A replica with edits of its own pending shows them, which is that
/// session's alone: written for it, and not kept.
///
/// Keeps the latest version of each room shown since the process started (a room's
/// text is about a kilobyte, its frames four times that at most), and the text of each of
/// its stickers as last written (of ``fragmentRooms`` rooms at most): a version where one
/// sticker moved, and a frame made for one session's pending edits, write the other
/// stickers' text again instead of encoding them (a photo of a hundred stickers was
/// encoded whole twice an update: the shared version and the sender's own).
final class RoomFrames: Sendable {
    struct Version: Equatable {
        var epoch: String
        var version: Int64
    }

    private struct Latest {
        var version: Version
        var body: [UInt8]
        /// By ``variant(canUndo:canRedo:)``: made when a tab first needs it.
        var frames: [ByteBuffer?] = [nil, nil, nil, nil]
    }

    private let latest = Mutex<[String: Latest]>([:])
    /// By room: each sticker's text in the last room frame written (``PageJSON/ShownSticker``),
    /// in that frame's order, with what it was made from. Emptied, all at once, past
    /// ``fragmentRooms`` rooms (a room's stickers are then encoded again once).
    private let fragments = Mutex<[String: [Fragment]]>([:])
    static let fragmentRooms = 10_000
    let metrics: WebMetrics

    private struct Fragment {
        var shown: PageJSON.ShownSticker
        var text: [UInt8]
    }

    init(metrics: WebMetrics) {
        self.metrics = metrics
    }

    /// The `room` frame for this replica and what this person can undo and redo in it:
    /// the bytes ``PageJSON/room(_:undo:)`` writes, as a text frame's payload.
    func frame(_ replica: RoomReplica, canUndo: Bool, canRedo: Bool) -> ByteBuffer {
        guard let epoch = replica.epoch, replica.pendingEventIds.isEmpty else {
            metrics.roomFramesWritten.increment()
            return Self.frame(body(replica, keeping: false), canUndo: canUndo, canRedo: canRedo)
        }
        let version = Version(epoch: epoch, version: replica.version)
        let variant = Self.variant(canUndo: canUndo, canRedo: canRedo)
        let shared: ByteBuffer? = latest.withLock { latest in
            guard let held = latest[replica.roomId], held.version == version else { return nil }
            if let frame = held.frames[variant] { return frame }
            let frame = Self.frame(held.body, canUndo: canUndo, canRedo: canRedo)
            latest[replica.roomId]?.frames[variant] = frame
            return frame
        }
        if let frame = shared {
            metrics.roomFramesShared.increment()
            return frame
        }
        let body = body(replica)
        let frame = Self.frame(body, canUndo: canUndo, canRedo: canRedo)
        latest.withLock { latest in
            // Never back to an older version (a late writer of the one before).
            if let held = latest[replica.roomId], held.version.epoch == epoch, held.version.version > version.version { return }
            var fresh = Latest(version: version, body: body)
            fresh.frames[variant] = frame
            latest[replica.roomId] = fresh
        }
        metrics.roomFramesWritten.increment()
        return frame
    }

    private static func variant(canUndo: Bool, canRedo: Bool) -> Int {
        (canUndo ? 2 : 0) + (canRedo ? 1 : 0)
    }

    /// The room part, its closing brace giving way to the person's two fields.
    private static func frame(_ body: [UInt8], canUndo: Bool, canRedo: Bool) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.reserveCapacity(body.count + 32)
        frame.writeBytes(body.dropLast())
        frame.writeString(#","canUndo":"#)
        frame.writeString(canUndo ? "true" : "false")
        frame.writeString(#","canRedo":"#)
        frame.writeString(canRedo ? "true" : "false")
        frame.writeInteger(UInt8(ascii: "}"))
        return frame
    }

    /// ``PageJSON/roomBody(_:)``'s text, each sticker's written from ``fragments`` when
    /// it looks as it did then, encoded when not. A room's stickers keep their order
    /// from one version to the next, so each is first looked for where it was (a sticker
    /// added or deleted shifts the rest: then by id). `keeping`: what was written is kept
    /// for the next (not for a frame of one session's pending edits, which the room's
    /// next version does not show).
    func body(_ replica: RoomReplica, keeping: Bool = true) -> [UInt8] {
        let stickers = replica.visibleStickers
        let known = fragments.withLock { $0[replica.roomId] } ?? []
        var byId: [String: Int]?
        var written: [Fragment] = []
        if keeping { written.reserveCapacity(stickers.count) }
        var out: [UInt8] = []
        out.reserveCapacity(256 + 160 * stickers.count)
        // The head as an object of its own, its closing brace giving way to the stickers.
        JSON.object(PageJSON.roomHead(replica)).write(into: &out)
        out.removeLast()
        out.append(contentsOf: #","stickers":["#.utf8)
        var encoded = 0
        for (index, sticker) in stickers.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            let shown = PageJSON.ShownSticker(sticker)
            var at: Int? = index < known.count && known[index].shown.id == sticker.id ? index : nil
            if at == nil, !known.isEmpty {
                if byId == nil { byId = Dictionary(known.enumerated().map { ($1.shown.id, $0) }, uniquingKeysWith: { first, _ in first }) }
                at = byId?[sticker.id]
            }
            if let at, known[at].shown == shown {
                out.append(contentsOf: known[at].text)
                if keeping { written.append(known[at]) }
                continue
            }
            var text: [UInt8] = []
            shown.json.write(into: &text)
            out.append(contentsOf: text)
            if keeping { written.append(Fragment(shown: shown, text: text)) }
            encoded += 1
        }
        out.append(contentsOf: "]}".utf8)
        // Kept in this frame's order (stickers gone are gone with it), unless nothing was
        // encoded and the order is the same.
        if keeping, encoded > 0 || written.count != known.count || byId != nil {
            fragments.withLock { all in
                if all.count >= Self.fragmentRooms, all[replica.roomId] == nil { all.removeAll(keepingCapacity: true) }
                all[replica.roomId] = written
            }
        }
        return out
    }
}
