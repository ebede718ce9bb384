/// The WAL's upkeep beside a writer that never checkpoints (`checkpoints: .separate`):
/// the coordinator runs a ``pass()`` every half second.
///
/// A pass is a passive checkpoint on the checkpointer's connection (the bulk of the
/// copying, off the commit path) and, once the WAL holds more than `restartAboveFrames`,
/// a restart queued on the writer (``TandemStore/restartWAL(waitingAtMostMs:)``): it
/// copies the few frames appended since, and the next commit writes the WAL from its
/// beginning. Without the restart the WAL grows for as long as commits keep coming
/// (about 25 MB a second at 2,000 events a second), as a passive checkpoint never
/// catches up with the writer.
///
/// A restart that could not finish (a reader, or another process's checkpoint, held on
/// past `waitingAtMostMs`) is tried again after 1, 2, 4 ... up to 64 passes, so that a
/// reader stuck in a long read transaction (an operator's shell) does not make commits
/// wait on every pass; passive passes go on meanwhile.
public struct WALCheckpointer: Sendable {
    public let writer: SQLiteStore
    public let checkpointer: SQLiteStore
    public var restartAboveFrames: Int
    public var waitingAtMostMs: Int32
    private var backoff = 0
    private var skip = 0
    private var failures = 0

    /// 4,096 frames are 16 MiB of 4 KiB pages.
    public static let restartAboveFrames = 4_096

    public init(writer: SQLiteStore, checkpointer: SQLiteStore, restartAboveFrames: Int = Self.restartAboveFrames,
                waitingAtMostMs: Int32 = 1_000) {
        self.writer = writer
        self.checkpointer = checkpointer
        self.restartAboveFrames = restartAboveFrames
        self.waitingAtMostMs = waitingAtMostMs
    }

    public struct Pass: Sendable, Equatable {
        /// Frames in the WAL after the passive checkpoint, and how many of them it copied.
        public var walFrames: Int
        public var checkpointed: Int
        /// A restart was tried ...
        public var restartTried: Bool
        /// ... and the WAL was started over.
        public var restarted: Bool
        /// Restarts that could not finish in a row (0 after one that did).
        public var failedRestarts: Int
    }

    public mutating func pass() async throws -> Pass {
        let (frames, checkpointed) = try await checkpointer.checkpoint()
        var pass = Pass(walFrames: frames, checkpointed: checkpointed, restartTried: false, restarted: false, failedRestarts: 0)
        if frames > restartAboveFrames {
            if skip > 0 {
                skip -= 1
            } else {
                pass.restartTried = true
                pass.restarted = try await writer.restartWAL(waitingAtMostMs: waitingAtMostMs)
                if pass.restarted {
                    backoff = 0
                    failures = 0
                } else {
                    failures += 1
                    backoff = min(max(1, backoff * 2), 64)
                    skip = backoff
                }
            }
        }
        pass.failedRestarts = failures
        return pass
    }
}
