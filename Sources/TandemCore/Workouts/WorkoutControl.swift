/// A control command on `users/{u}/workouts/{w}/control/{device}` (CONTRACT "Workouts").
public struct WorkoutControl: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case start, pause, resume, stop
    }

    public let commandId: String
    public let type: Kind
    public var timestamp: Millis
    /// Only meaningful on `start`; nil means the default, `standalone`.
    public let mode: WorkoutMode?

    public init(commandId: String, type: Kind, timestamp: Millis, mode: WorkoutMode? = nil) {
        self.commandId = commandId
        self.type = type
        self.timestamp = timestamp
        self.mode = mode
    }

    /// Reads a WorkoutControl payload. The failure's id is the commandId when a valid one
    /// could be read, else "".
    public static func decode(_ bytes: some Collection<UInt8>) throws(DecodeFailure) -> WorkoutControl {
        try PayloadReader.decode(bytes, idSource: .field("commandId")) { (reader) throws(Rejection) in
            WorkoutControl(
                commandId: try reader.identifier("commandId"),
                type: try reader.oneOf("type", Kind.self),
                timestamp: try reader.int64("timestamp"),
                mode: try reader.optionalOneOf("mode", WorkoutMode.self)
            )
        }
    }

    public var json: JSON {
        var members: [JSON.Member] = [
            .init("commandId", .string(commandId)),
            .init("type", .string(type.rawValue)),
            .init("timestamp", .int(timestamp)),
        ]
        if let mode { members.append(.init("mode", .string(mode.rawValue))) }
        return .object(members)
    }
}
