import ArgumentParser
import Logging
import TandemLogging

/// `--log-level` [TANDEM_LOG_LEVEL] and `--log-format` [TANDEM_LOG_FORMAT], declared once
/// for every executable: the servers take both with `@OptionGroup var logging:
/// LoggingOptions`; the agent, whose output is for people, takes the level alone, with
/// `warning` as its default.
public struct LoggingOptions: ParsableArguments {
    public static func level(default value: Logger.Level) -> Setting<String> {
        .choice("log-level", "TANDEM_LOG_LEVEL", default: value.rawValue, words: Logger.Level.allCases.map(\.rawValue))
    }

    public static let format = Setting<String>.choice("log-format", "TANDEM_LOG_FORMAT", default: "text", words: LogFormat.allCases.map(\.rawValue))

    @Option(help: Self.level(default: .info).help("trace, debug, info, notice, warning, error or critical"))
    public var logLevel: String?

    @Option(help: Self.format.help("text, or json: one JSON object per line on stderr", valueName: "format"))
    public var logFormat: String?

    public init() {}

    /// The level and format: each flag, else its variable, else info and text.
    public func resolve(in environment: [String: String]) throws -> (level: Logger.Level, format: LogFormat) {
        let level = Logger.Level(rawValue: try Self.level(default: .info).value(logLevel, in: environment).lowercased()) ?? .info
        let format = LogFormat(rawValue: try Self.format.value(logFormat, in: environment).lowercased()) ?? .text
        return (level, format)
    }
}
