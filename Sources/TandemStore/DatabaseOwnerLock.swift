#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One coordinator owns a SQLite file: two would take turns kicking each other off the
/// broker under one client id and write interleaved batches into one database.
///
/// The owner holds an exclusive `flock` on the database file itself for as long as it
/// runs. `flock` locks are separate from the POSIX record locks SQLite takes on the same
/// file, so they do not disturb each other; they belong to the open file description,
/// so the kernel drops the lock when the process dies however it dies (SIGKILL included),
/// and a new coordinator can start at once. Readers (`--check`, `--backup`, the query
/// connection) never take it.
public final class DatabaseOwnerLock: Sendable {
    public let path: String
    private let descriptor: Int32

    /// Takes the lock without waiting, creating the file (and its directory) if missing.
    /// Throws ``OwnedElsewhere`` when another process holds it.
    public static func acquire(path: String) throws -> DatabaseOwnerLock {
        try Platform.createParentDirectory(of: path)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw SQLiteError(code: .cantOpen, message: reason, context: "open \(path) to take the owner's lock")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            close(fd)
            if busy { throw OwnedElsewhere(path: path) }
            throw SQLiteError(code: .cantOpen, message: reason, context: "lock \(path)")
        }
        return DatabaseOwnerLock(path: path, descriptor: fd)
    }

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        // Closing the descriptor releases the lock.
        close(descriptor)
    }

    /// Another process (another coordinator) holds the file's lock.
    public struct OwnedElsewhere: Error, CustomStringConvertible {
        public var path: String
        public var description: String {
            "another coordinator owns the database \(path): one coordinator per SQLite file (stop the other one, give this one its own --database, or run several on PostgreSQL)"
        }
    }
}
