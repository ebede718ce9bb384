#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import TandemCore

/// Where an agent's output goes: lines for people, or one JSON object per line, and on
/// a terminal a status line redrawn in place under them.
///
/// Writes go straight to file descriptor 1 under a lock, so lines from different tasks
/// never interleave and a status line is cleared before a normal line is printed.
public final class Console: Sendable {
    public let json: Bool
    /// Whether stdout is a terminal (status lines are redrawn in place only there).
    public let isTerminal: Bool
    private let statusShown = Mutex(false)

    public init(json: Bool, isTerminal: Bool = isatty(1) == 1) {
        self.json = json
        self.isTerminal = isTerminal
    }

    /// A line for people; ignored in JSON mode.
    public func line(_ text: String) {
        guard !json else { return }
        emit(text + "\n")
    }

    /// A JSON line (`{"type":...}`); ignored in human mode.
    public func object(_ value: JSON) {
        guard json else { return }
        emit(value.text + "\n")
    }

    /// Human text or a JSON object, whichever mode this is.
    public func output(human: @autoclosure () -> String, json value: @autoclosure () -> JSON) {
        if json { emit(value().text + "\n") } else { emit(human() + "\n") }
    }

    /// An error: on stderr for people, as `{"type":"error","message":...}` in JSON mode.
    public func error(_ message: String, code: String? = nil) {
        if json {
            var members: [JSON.Member] = [.init("type", "error")]
            if let code { members.append(.init("code", .string(code))) }
            members.append(.init("message", .string(message)))
            emit(JSON.object(members).text + "\n")
        } else {
            clearStatus()
            Self.write(2, "error: \(message)\n")
        }
    }

    /// The status line: redrawn in place on a terminal, one line per call otherwise.
    public func status(_ text: String) {
        guard !json else { return }
        if isTerminal {
            statusShown.withLock { shown in
                Self.write(1, "\r\u{1B}[2K" + text)
                shown = true
            }
        } else {
            emit(text + "\n")
        }
    }

    /// Ends a status line so the next output starts on a fresh line.
    public func clearStatus() {
        statusShown.withLock { shown in
            if shown { Self.write(1, "\r\u{1B}[2K") }
            shown = false
        }
    }

    private func emit(_ text: String) {
        statusShown.withLock { shown in
            if shown { Self.write(1, "\r\u{1B}[2K") }
            shown = false
            Self.write(1, text)
        }
    }

    private static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { buf in
                #if canImport(Glibc)
                Glibc.write(fd, buf.baseAddress! + offset, buf.count - offset)
                #else
                Darwin.write(fd, buf.baseAddress! + offset, buf.count - offset)
                #endif
            }
            if n <= 0 {
                if n < 0, errno == EINTR { continue }
                return
            }
            offset += n
        }
    }
}
