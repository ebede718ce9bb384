import TandemCore

/// Why a line typed on stdin is not a command; the message says what would be.
public struct InputError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Splitting a typed line into words, keeping the rest of the line as typed for free
/// text (`send bob hello   there`).
public struct InputLine: Sendable {
    public let words: [Substring]
    private let text: Substring

    public init(_ line: String) {
        text = Substring(line)
        words = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
    }

    /// The first word, lowercased; nil for an empty line or a `#` comment.
    public var verb: String? {
        guard let first = words.first, !first.hasPrefix("#") else { return nil }
        return first.lowercased()
    }

    /// The text after the first `count` words, with the whitespace before it removed
    /// and the line's other spacing kept; nil when there is none.
    public func rest(after count: Int) -> String? {
        guard words.count > count else { return nil }
        let start = words[count].startIndex
        var end = text.endIndex
        while end > start, let last = text[..<end].last, last == " " || last == "\t" { end = text.index(before: end) }
        return String(text[start..<end])
    }

    public func identifier(at index: Int, _ name: String, usage: String) throws(InputError) -> String {
        guard index < words.count else { throw InputError("missing \(name); usage: \(usage)") }
        let word = String(words[index])
        guard Identifier.isValid(word) else {
            throw InputError("\(name) \"\(word)\" is not valid: 1-\(Identifier.maxLength) characters of A-Z a-z 0-9 _ . -")
        }
        return word
    }

    public func number(at index: Int, _ name: String, usage: String, positive: Bool = false) throws(InputError) -> Double {
        guard index < words.count else { throw InputError("missing \(name); usage: \(usage)") }
        guard let value = Double(words[index]), value.isFinite else {
            throw InputError("\(name) must be a number, not \"\(words[index])\"")
        }
        if positive, value <= 0 { throw InputError("\(name) must be greater than 0") }
        return value
    }

    public func expectCount(_ count: Int, usage: String) throws(InputError) {
        if words.count < count { throw InputError("too few arguments; usage: \(usage)") }
        if words.count > count { throw InputError("too many arguments; usage: \(usage)") }
    }
}
