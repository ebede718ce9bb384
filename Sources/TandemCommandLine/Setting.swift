import ArgumentParser

/// One setting of a command: its flag, its environment variable and its default, each
/// written once and used both in `--help` and in resolving the value. A flag wins over
/// the variable, the variable over the default; a bad value in either place is a usage
/// error (exit 64) that names the flag or the variable.
///
/// The command declares the flag with ArgumentParser as usual, `@Option(help:
/// Self.port.help("MQTT broker port")) var port: Int?`, and resolves it with
/// `try Self.port.value(port, in: environment)`.
public struct Setting<Value: Sendable>: Sendable {
    /// The flag without its dashes: `port`.
    public let flag: String
    /// The environment variable: `TANDEM_MQTT_PORT`.
    public let variable: String
    /// What an unset flag and variable mean; nil: nothing (an anonymous connection).
    public let defaultValue: Value?
    let shownDefault: String?
    /// Reads the variable's text; nil when it is not a value of this kind.
    let parse: @Sendable (String) -> Value?
    /// What the variable's text should have been, for its error: "an integer".
    let kind: String
    /// Why a value is not acceptable ("must be between 1 and 65535"), nil when it is.
    let check: @Sendable (Value) -> String?

    public init(
        _ flag: String, _ variable: String, default defaultValue: Value?, shown: String? = nil, kind: String,
        parse: @escaping @Sendable (String) -> Value?, check: @escaping @Sendable (Value) -> String? = { _ in nil }
    ) {
        self.flag = flag
        self.variable = variable
        self.defaultValue = defaultValue
        self.shownDefault = shown ?? defaultValue.map { "\($0)" }
        self.parse = parse
        self.kind = kind
        self.check = check
    }

    /// The help line: the summary, the variable in brackets, the default.
    public func help(_ summary: String, valueName: String? = nil) -> ArgumentHelp {
        let text = "\(summary) [\(variable)]" + (shownDefault.map { " (default: \($0))" } ?? "")
        return ArgumentHelp(text, valueName: valueName)
    }

    /// The flag's value, else the variable's, else the default (nil when there is none).
    public func resolve(_ flagValue: Value?, in environment: [String: String]) throws -> Value? {
        if let flagValue {
            if let problem = check(flagValue) { throw ValidationError("--\(flag) \(problem), not \(flagValue)") }
            return flagValue
        }
        guard let raw = environment[variable], !raw.isEmpty else { return defaultValue }
        guard let value = parse(raw) else { throw ValidationError("\(variable)=\(raw) is not \(kind)") }
        if let problem = check(value) { throw ValidationError("\(variable) \(problem), not \(raw)") }
        return value
    }

    /// ``resolve(_:in:)`` for a setting that has a default.
    public func value(_ flagValue: Value?, in environment: [String: String]) throws -> Value {
        guard let value = try resolve(flagValue, in: environment) else {
            preconditionFailure("the setting --\(flag) has no default")
        }
        return value
    }
}

extension Setting where Value == String {
    /// Text; `check` says why a value is refused.
    public static func text(
        _ flag: String, _ variable: String, default value: String? = nil, shown: String? = nil,
        check: @escaping @Sendable (String) -> String? = { _ in nil }
    ) -> Setting {
        Setting(flag, variable, default: value, shown: shown, kind: "text", parse: { $0 }, check: check)
    }

    /// One of a few words (`text`, `json`), in any case; the caller lowercases it.
    public static func choice(_ flag: String, _ variable: String, default value: String, words: [String]) -> Setting {
        Setting(flag, variable, default: value, kind: "one of \(words.joined(separator: ", "))", parse: { $0 }, check: {
            words.contains($0.lowercased()) ? nil : "must be one of \(words.joined(separator: ", "))"
        })
    }
}

extension Setting where Value == Int {
    /// A whole number within `range`.
    public static func integer(_ flag: String, _ variable: String, default value: Int? = nil, range: ClosedRange<Int>) -> Setting {
        Setting(flag, variable, default: value, kind: "an integer", parse: { Int($0) }, check: {
            range.contains($0) ? nil : "must be between \(range.lowerBound) and \(range.upperBound)"
        })
    }
}

extension Setting where Value == Double {
    /// A finite number, positive (or, with `allowZero`, not negative) and at most `maximum`.
    public static func number(
        _ flag: String, _ variable: String, default value: Double? = nil, allowZero: Bool = false,
        maximum: Double = .greatestFiniteMagnitude, kind: String = "a number"
    ) -> Setting {
        Setting(flag, variable, default: value, shown: value.map(Self.shortText), kind: kind, parse: { Double($0) }, check: {
            guard $0.isFinite, allowZero ? $0 >= 0 : $0 > 0 else {
                return "must be a \(allowZero ? "non-negative" : "positive") number"
            }
            return $0 <= maximum ? nil : "must be at most \(Self.shortText(maximum))"
        })
    }

    /// Seconds, fractions allowed (0.5), positive and at most a year.
    public static func seconds(_ flag: String, _ variable: String, default value: Double? = nil) -> Setting {
        number(flag, variable, default: value, maximum: 86_400 * 365, kind: "a number of seconds")
    }

    /// 30 rather than 30.0; 0.5 stays.
    static func shortText(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
