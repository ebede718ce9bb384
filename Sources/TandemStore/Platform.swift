#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CSQLite
import TandemCore

/// The few operating-system calls the store needs, without pulling in Foundation.
enum Platform {
    /// The wall clock in milliseconds since the Unix epoch.
    static func nowMillis() -> Millis {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Millis(ts.tv_sec) * 1000 + Millis(ts.tv_nsec) / 1_000_000
    }

    /// The size of a file in bytes, 0 if it does not exist.
    static func fileSize(_ path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : 0
    }

    static func fileExists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    /// `mkdir -p` for the directory that will hold `path`.
    static func createParentDirectory(of path: String) throws(SQLiteError) {
        guard let slash = path.lastIndex(of: "/") else { return }
        let directory = String(path[..<slash])
        guard !directory.isEmpty else { return }
        var partial = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/", omittingEmptySubsequences: true) {
            partial += "/" + component
            if mkdir(partial, 0o755) != 0 && errno != EEXIST {
                let reason = String(cString: strerror(errno))
                throw SQLiteError(code: .cantOpen, message: reason, context: "create directory \(partial)")
            }
        }
    }
}
