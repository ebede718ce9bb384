import Synchronization
import TandemClient
import TandemCore

/// The `room` frames of the process, the room's part written once per room version:
/// every tab showing a room gets the same bytes but for `canUndo` and `canRedo` (the
/// person's), so the first tab to write a version keeps its text here and the others
/// copy it and add their two fields. A replica with edits of its own pending shows
/// them, which is that session's alone: written for it, and not kept.
///
/// Keeps the latest version of each room shown since the process started (a room's
/// text is about a kilobyte).
final class RoomFrames: Sendable {
    struct Version: Equatable {
        var epoch: String
        var version: Int64
    }

    private let latest = Mutex<[String: (version: Version, body: [UInt8])]>([:])
    let metrics: WebMetrics

    init(metrics: WebMetrics) {
        self.metrics = metrics
    }

    /// The `room` frame's text for this replica and what this person can undo and redo
    /// in it: the bytes ``PageJSON/room(_:undo:)`` writes.
    func frame(_ replica: RoomReplica, canUndo: Bool, canRedo: Bool) -> String {
        var out: [UInt8]
        if let epoch = replica.epoch, replica.pendingEventIds.isEmpty {
            let version = Version(epoch: epoch, version: replica.version)
            if let shared = latest.withLock({ $0[replica.roomId].flatMap { $0.version == version ? $0.body : nil } }) {
                metrics.roomFramesShared.increment()
                out = shared
            } else {
                out = Self.body(replica)
                let body = out
                latest.withLock { latest in
                    // Never back to an older version (a late writer of the one before).
                    if let held = latest[replica.roomId], held.version.epoch == epoch, held.version.version > version.version { return }
                    latest[replica.roomId] = (version, body)
                }
                metrics.roomFramesWritten.increment()
            }
        } else {
            out = Self.body(replica)
            metrics.roomFramesWritten.increment()
        }
        // The body's closing brace gives way to the person's two fields.
        out.removeLast()
        out.append(contentsOf: #","canUndo":"#.utf8)
        out.append(contentsOf: (canUndo ? "true" : "false").utf8)
        out.append(contentsOf: #","canRedo":"#.utf8)
        out.append(contentsOf: (canRedo ? "true" : "false").utf8)
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    private static func body(_ replica: RoomReplica) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + 160 * replica.confirmedStickers.count)
        PageJSON.roomBody(replica).write(into: &out)
        return out
    }
}
