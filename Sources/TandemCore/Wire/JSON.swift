/// A JSON value, parsed strictly and written compactly, with no Foundation.
///
/// Tandem parses every inbound payload with this so that validation is exact and the
/// same everywhere: integers stay integers (timestamps), numbers are finite, nesting is
/// bounded (hostile input), and a payload's id can be read even when other fields are wrong.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in 64 bits.
    case int(Int64)
    /// Any other finite number.
    case double(Double)
    case string(String)
    case array([JSON])
    /// Members in the order they were written; a repeated key: the last one wins on lookup.
    case object([Member])

    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: JSON
        public init(_ key: String, _ value: JSON) {
            self.key = key
            self.value = value
        }
    }

    /// Builds an object from key/value pairs in order.
    public static func obj(_ members: KeyValuePairs<String, JSON>) -> JSON {
        .object(members.map { Member($0.key, $0.value) })
    }

    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// An integer, or a double with an integral value that converts exactly.
    public var int64Value: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) <= 9_007_199_254_740_992: return Int64(d)
        default: return nil
        }
    }

    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var arrayValue: [JSON]? {
        if case .array(let items) = self { return items }
        return nil
    }

    public var isNull: Bool { self == .null }

    /// A short name of the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

// MARK: - Parsing

public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var offset: Int
    public var reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSON {
    /// Deepest nesting accepted; deeper input is refused rather than recursed into.
    public static let maxDepth = 32

    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSON {
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSON in
            var parser = JSONParser(bytes: buffer)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw parser.error("unexpected data after the value") }
            return value
        }
    }

    public static func parse(_ text: String) throws(JSONParseError) -> JSON {
        try parse(Array(text.utf8))
    }
}

private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    func error(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func expect(_ literal: StaticString, _ value: JSON) throws(JSONParseError) -> JSON {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("truncated literal") }
        let start = literal.utf8Start
        for i in 0..<count where bytes[index + i] != start[i] {
            throw error("invalid literal")
        }
        index += count
        return value
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSON {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSON {
        guard depth <= JSON.maxDepth else { throw error("nesting deeper than \(JSON.maxDepth)") }
        index += 1
        var members: [JSON.Member] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            members.append(JSON.Member(key, value))
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "}") else { throw error("expected ',' or '}'") }
            index += 1
            return .object(members)
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSON {
        guard depth <= JSON.maxDepth else { throw error("nesting deeper than \(JSON.maxDepth)") }
        index += 1
        var elements: [JSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "]") else { throw error("expected ',' or ']'") }
            index += 1
            return .array(elements)
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        var ascii = true
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII (ids, types, most text) is valid UTF-8 as it is: decoded
                // without String(validating:), whose generic metadata a profile of
                // tandem-web found instantiated on every call.
                if ascii { return String(decoding: slice, as: UTF8.self) }
                guard let s = String(validating: slice, as: UTF8.self) else {
                    throw JSONParseError(offset: start, reason: "string is not valid UTF-8")
                }
                return s
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw error("control character in string") }
            if b >= 0x80 { ascii = false }
            index += 1
        }
        var out = Array(bytes[start..<index])
        while index < bytes.count {
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                guard let s = String(validating: out, as: UTF8.self) else {
                    throw JSONParseError(offset: start, reason: "string is not valid UTF-8")
                }
                return s
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw error("lone surrogate")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid surrogate pair") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("lone surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw error("invalid unicode escape") }
                    out.append(contentsOf: UTF8.encode(u)!)
                default:
                    throw error("invalid escape")
                }
            default:
                if b < 0x20 { throw error("control character in string") }
                out.append(b)
                index += 1
            }
        }
        throw error("unterminated string")
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated unicode escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw error("invalid unicode escape")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    mutating func parseNumber() throws(JSONParseError) -> JSON {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let i = Int64(text) { return .int(i) }
        guard let d = Double(text), d.isFinite else {
            throw JSONParseError(offset: start, reason: "number out of range")
        }
        return .double(d)
    }

    func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}

// MARK: - Writing

extension JSON {
    /// Compact UTF-8 JSON, members in order.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(into: &out)
        return out
    }

    public var text: String { String(decoding: serialized(), as: UTF8.self) }

    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): JSON.writeInteger(i, into: &out)
        case .double(let d): JSON.writeDouble(d, into: &out)
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                e.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, m) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(m.key, into: &out)
                out.append(UInt8(ascii: ":"))
                m.value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A finite number as an integer when it is one (`100`, not `100.0`), else Swift's
    /// shortest round-trip form; a non-finite one as `null` (never produced on purpose).
    public static func writeDouble(_ d: Double, into out: inout [UInt8]) {
        if d.isFinite {
            if d.rounded() == d, abs(d) < 1e15 {
                writeInteger(Int64(d), into: &out)
            } else {
                out.append(contentsOf: d.description.utf8)
            }
        } else {
            out.append(contentsOf: "null".utf8)
        }
    }

    /// Decimal digits straight into `out` (no intermediate `String`: snapshots write
    /// thousands of numbers).
    public static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        if value >= 0, value < 10 {
            out.append(UInt8(truncatingIfNeeded: value) &+ 48)
            return
        }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0) // 24 bytes: Int64 has at most 20 digits
        withUnsafeMutableBytes(of: &digits) { buffer in
            var i = buffer.count
            repeat {
                i -= 1
                buffer[i] = UInt8(truncatingIfNeeded: magnitude % 10) &+ 48
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                i -= 1
                buffer[i] = UInt8(ascii: "-")
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[i...]))
        }
    }

    static func needsEscaping(_ b: UInt8) -> Bool { b < 0x20 || b == 0x22 || b == 0x5C }

    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Fast path: most strings (ids, topics, images) need no escaping: one copy.
        let copied = s.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard !bytes.contains(where: needsEscaping) else { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if copied != true {
            for b in s.utf8 { writeEscaped(b, into: &out) }
        }
        out.append(UInt8(ascii: "\""))
    }

    static func writeEscaped(_ b: UInt8, into out: inout [UInt8]) {
        switch b {
        case 0x22: out.append(0x5C); out.append(0x22)
        case 0x5C: out.append(0x5C); out.append(0x5C)
        case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
        case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
        case 0..<0x20:
            let hex = Array("0123456789abcdef".utf8)
            out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(b >> 4)], hex[Int(b & 0xF)]])
        default: out.append(b)
        }
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSON {
    public init(_ value: String?) { self = value.map(JSON.string) ?? .null }
    public init(_ value: Int64?) { self = value.map(JSON.int) ?? .null }
    public init(_ value: Double?) { self = value.map(JSON.double) ?? .null }
}
