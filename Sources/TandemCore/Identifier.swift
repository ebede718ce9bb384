/// Identifiers on the wire (`userId`, `roomId`, `stickerId`, `eventId`, ...):
/// 1-64 characters of `[A-Za-z0-9_.-]`. Anything else is invalid.
public enum Identifier {
    public static let maxLength = 64

    public static func isValid(_ value: some StringProtocol) -> Bool {
        var count = 0
        for byte in value.utf8 {
            count += 1
            if count > maxLength { return false }
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"):
                continue
            default:
                return false
            }
        }
        return count > 0
    }
}
