/// Reads one top-level field out of a payload that is *not* valid JSON, so that a
/// rejection can still carry the id its sender will match (CONTRACT "Receipts", Changes
/// of 2026-11-22): a lone surrogate in a text, a number too large for a double, a
/// truncated tail, a byte-order mark, deep nesting elsewhere in the payload.
///
/// It scans the bytes once, tracking strings (with their escapes) and nesting, and looks
/// only at members of the outermost object. A value counts only when it is complete and
/// plain: a string without escapes followed by its closing quote, or an integer followed
/// by a delimiter (so a number cut off by a truncated tail is never taken). Where a key
/// appears twice, the last complete value wins, as in ``JSON/subscript(_:)``.
public enum FieldSalvage {
    /// The string value of `key` in the outermost object, if one can be read.
    public static func string(_ bytes: some Collection<UInt8>, key: String) -> String? {
        var found: String?
        scan(Array(bytes), key: Array(key.utf8)) { bytes, start in
            guard start < bytes.count, bytes[start] == quote else { return }
            var i = start + 1
            while i < bytes.count, bytes[i] != quote {
                if bytes[i] == backslash || bytes[i] < 0x20 { return }
                i += 1
            }
            guard i < bytes.count else { return }
            found = String(validating: bytes[(start + 1)..<i], as: UTF8.self)
        }
        return found
    }

    /// The integer value of `key` in the outermost object, if one can be read.
    public static func int64(_ bytes: some Collection<UInt8>, key: String) -> Int64? {
        var found: Int64?
        scan(Array(bytes), key: Array(key.utf8)) { bytes, start in
            var i = start
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
            let digits = i
            while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i += 1 }
            guard i > digits, i < bytes.count else { return }
            let next = bytes[i]
            guard next == UInt8(ascii: ",") || next == UInt8(ascii: "}") || isSpace(next) else { return }
            found = Int64(String(decoding: bytes[start..<i], as: UTF8.self))
        }
        return found
    }

    static let quote = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")

    static func isSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }

    /// Calls `value(bytes, index)` with the index of the value of every member named `key`
    /// of the outermost object.
    static func scan(_ bytes: [UInt8], key: [UInt8], value: ([UInt8], Int) -> Void) {
        var i = 0
        // A UTF-8 byte-order mark and white space may stand before the object.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { i = 3 }
        while i < bytes.count, isSpace(bytes[i]) { i += 1 }
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return }
        i += 1
        var depth = 1
        var expectKey = true
        while i < bytes.count, depth > 0 {
            let b = bytes[i]
            if b == quote {
                let start = i + 1
                i += 1
                while i < bytes.count, bytes[i] != quote {
                    i += bytes[i] == backslash ? 2 : 1
                }
                guard i < bytes.count else { return }
                let end = i
                i += 1
                if depth == 1, expectKey {
                    var j = i
                    while j < bytes.count, isSpace(bytes[j]) { j += 1 }
                    if j < bytes.count, bytes[j] == UInt8(ascii: ":") {
                        expectKey = false
                        if bytes[start..<end].elementsEqual(key) {
                            j += 1
                            while j < bytes.count, isSpace(bytes[j]) { j += 1 }
                            value(bytes, j)
                        }
                        i = j
                    }
                }
                continue
            }
            switch b {
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            case UInt8(ascii: ","): if depth == 1 { expectKey = true }
            default: break
            }
            i += 1
        }
    }
}
