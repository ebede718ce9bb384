/// Tandem's version: what the coordinator reports in its status and both binaries print
/// for `--version`.
public enum TandemVersion {
    public static let current = "0.1.0"
}
