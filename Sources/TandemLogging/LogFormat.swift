import Logging

/// How an executable writes its log lines (`--log-format`): `text`, swift-log's
/// `StreamLogHandler` on standard error (metadata as `key=value` before the message), or
/// `json`, one object per line (``JSONLogHandler``).
public enum LogFormat: String, CaseIterable, Sendable {
    case text
    case json

    /// The handler for one logger, at `level`. Executables pass this to
    /// `LoggingSystem.bootstrap`; libraries never do.
    public func handler(label: String, level: Logger.Level) -> any LogHandler {
        switch self {
        case .text:
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        case .json:
            var handler = JSONLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
