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
/// its stickers as last written: a version where one sticker moved, and a frame made for
/// one session's pending edits, write the other stickers' text again instead of encoding
/// them (a photo of a hundred stickers was encoded whole twice an update: the shared
/// version and the sender's own).
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
    /// By room, by sticker id: the sticker's text in a room frame (``PageJSON/sticker(_:)``)
    /// and what it was made from.
    private let fragments = Mutex<[String: [String: Fragment]]>([:])
    let metrics: WebMetrics

    /// What a sticker's text in a room frame says.
    private struct Look: Equatable {
        var image: String
        var frame: Frame
        var owner: String?

        init(_ sticker: Sticker) {
            image = sticker.image
            frame = sticker.frame
            owner = sticker.owner
        }
    }

    private struct Fragment {
        var look: Look
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
            return Self.frame(body(replica), canUndo: canUndo, canRedo: canRedo)
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
    /// it looks as it did then, encoded (and kept) when not.
    func body(_ replica: RoomReplica) -> [UInt8] {
        let stickers = replica.visibleStickers
        let known = fragments.withLock { $0[replica.roomId] } ?? [:]
        var fresh: [(String, Fragment)] = []
        var out: [UInt8] = []
        out.reserveCapacity(256 + 160 * stickers.count)
        // The head as an object of its own, its closing brace giving way to the stickers.
        JSON.object(PageJSON.roomHead(replica)).write(into: &out)
        out.removeLast()
        out.append(contentsOf: #","stickers":["#.utf8)
        for (index, sticker) in stickers.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            let look = Look(sticker)
            if let kept = known[sticker.id], kept.look == look {
                out.append(contentsOf: kept.text)
                continue
            }
            var text: [UInt8] = []
            PageJSON.sticker(sticker).write(into: &text)
            out.append(contentsOf: text)
            fresh.append((sticker.id, Fragment(look: look, text: text)))
        }
        out.append(contentsOf: "]}".utf8)
        // Stickers gone from the room are dropped once they are as many as those in it.
        let prune = known.count > 2 * stickers.count + 16
        if !fresh.isEmpty || prune {
            fragments.withLock { all in
                var table = all.removeValue(forKey: replica.roomId) ?? [:]
                for (id, fragment) in fresh { table[id] = fragment }
                if prune {
                    let ids = Set(stickers.map(\.id))
                    table = table.filter { ids.contains($0.key) }
                }
                all[replica.roomId] = table
            }
        }
        return out
    }
}
