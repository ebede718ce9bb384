#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import Synchronization

/// Writes each log event as one JSON object on one line of standard error, for log
/// shippers (`--log-format json`):
///
///     {"ts":"2026-11-22T10:15:03.042Z","level":"info","label":"tandem.coordinator","message":"online","source":"TandemCoordinator","topic":"tandem/v1/coordinator/status"}
///
/// `ts` is UTC with milliseconds; then `level`, `label`, `message`, `source` (the module
/// that logged), and every metadata key (the logger's, its metadata provider's and the
/// call's, the call's winning) as a member of its own: strings stay strings, arrays and
/// dictionaries become JSON arrays and objects. An error given to the call is
/// `error.message` and `error.type`. A metadata key that would clash with one of the
/// fixed members is written with a leading underscore (`_level`). Lines are written
/// whole, one `write` loop under a lock shared by every handler, so lines from
/// different threads never interleave.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let output: Output

    /// Where lines go: standard error, or (tests) a closure.
    public enum Output: Sendable {
        case standardError
        case lines(@Sendable (String) -> Void)
    }

    public init(label: String, output: Output = .standardError, metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider) {
        self.label = label
        self.output = output
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() {
            merged.merge(provided) { _, new in new }
        }
        if let explicit = event.metadata {
            merged.merge(explicit) { _, new in new }
        }
        if let error = event.error {
            merged["error.message"] = "\(error)"
            merged["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        let line = Self.line(
            timestamp: Self.now(), level: event.level, label: label, message: event.message.description,
            source: event.source, metadata: merged)
        switch output {
        case .standardError: Self.writeToStandardError(line)
        case .lines(let sink): sink(line)
        }
    }

    static let fixedKeys: Set<String> = ["ts", "level", "label", "message", "source"]

    /// One line: the JSON object and a newline.
    static func line(
        timestamp: String, level: Logger.Level, label: String, message: String, source: String, metadata: Logger.Metadata
    ) -> String {
        var out = "{\"ts\":"
        appendString(timestamp, to: &out)
        out += ",\"level\":"
        appendString(level.rawValue, to: &out)
        out += ",\"label\":"
        appendString(label, to: &out)
        out += ",\"message\":"
        appendString(message, to: &out)
        out += ",\"source\":"
        appendString(source, to: &out)
        for key in metadata.keys.sorted() {
            out += ","
            appendString(fixedKeys.contains(key) ? "_" + key : key, to: &out)
            out += ":"
            append(metadata[key]!, to: &out)
        }
        out += "}\n"
        return out
    }

    static func append(_ value: Logger.Metadata.Value, to out: inout String) {
        switch value {
        case .string(let text):
            appendString(text, to: &out)
        case .stringConvertible(let convertible):
            appendString(convertible.description, to: &out)
        case .array(let values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                append(element, to: &out)
            }
            out += "]"
        case .dictionary(let members):
            out += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                appendString(key, to: &out)
                out += ":"
                append(members[key]!, to: &out)
            }
            out += "}"
        }
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped (the
    /// rest of Unicode as it is; Swift strings are valid UTF-8).
    static func appendString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// Now as ISO 8601 in UTC with milliseconds: `2026-11-22T10:15:03.042Z`.
    static func now() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return iso8601(seconds: Int(spec.tv_sec), milliseconds: Int(spec.tv_nsec) / 1_000_000)
    }

    static func iso8601(seconds: Int, milliseconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
            + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(milliseconds), 3))Z"
    }

    /// One lock for every handler: a line is written whole before the next starts.
    static let writeLock = Mutex<Void>(())

    static func writeToStandardError(_ line: String) {
        var bytes = Array(line.utf8)
        writeLock.withLock { _ in
            bytes.withUnsafeMutableBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
                    if written > 0 {
                        offset += written
                    } else if written < 0 && errno == EINTR {
                        continue
                    } else {
                        return  // stderr is gone: nowhere left to say so
                    }
                }
            }
        }
    }
}
