import TandemCore

/// Fresh event and command ids: `<user>-<random hex>-<counter>`, unique per run (the
/// random part) and in order within it (the counter). Trimmed to the contract's 64
/// characters by shortening the user part when needed.
package struct IdentifierGenerator: Sendable {
    package let prefix: String
    private var counter: UInt64 = 0

    package init(user: String, random: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        let hex = String(random & 0xFFFF_FFFF, radix: 16)
        // user (<= 40) + "-" + hex (<= 8) + "-" + counter (<= 14 in practice) stays <= 64.
        prefix = "\(user.prefix(40))-\(hex)"
    }

    package mutating func next() -> String {
        counter += 1
        return "\(prefix)-\(counter)"
    }

    /// A random lowercase hex string of `count` characters (client ids).
    package static func randomHex(_ count: Int) -> String {
        var out = ""
        while out.count < count { out += String(UInt64.random(in: 0...UInt64.max), radix: 16) }
        return String(out.prefix(count))
    }
}
