#if canImport(Glibc)
import Glibc
#endif

/// stderr through the file descriptor (the C `stderr` global is not concurrency-safe to
/// reference in Swift 6).
enum FileHandleOutput {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 { return }
                offset += n
            }
        }
    }

    static func warn(_ text: String) {
        write("\r\u{1B}[2Ktandem-bench: \(text)\n")
    }

    /// The progress line, rewritten in place.
    static func progress(_ text: String) {
        write("\r\u{1B}[2K\(text)")
    }

    static func endProgress() {
        write("\r\u{1B}[2K")
    }
}
