/// Sizes fixed by the wire contract.
public enum WireLimits {
    /// Inbound payloads are at most 16 KiB.
    public static let maxPayloadBytes = 16 * 1024
    /// DM text is at most 4096 bytes (UTF-8).
    public static let maxDMTextBytes = 4096
    /// A sticker's `image` is 1-256 characters.
    public static let maxImageLength = 256
}

/// Milliseconds since the Unix epoch: every time on the wire except `elapsedTime`.
public typealias Millis = Int64
