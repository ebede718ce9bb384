import TandemCore

/// One finished workout, as the coordinator answers a `logbook` request.
public struct LogbookEntry: Sendable, Equatable {
    public var workoutId: String
    public var startedAt: Millis
    public var endedAt: Millis?
    public var origin: String
    public var mode: String
    public var summary: WorkoutSummary?

    public init(workoutId: String, startedAt: Millis, endedAt: Millis?, origin: String, mode: String, summary: WorkoutSummary?) {
        self.workoutId = workoutId
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.origin = origin
        self.mode = mode
        self.summary = summary
    }

    /// The `logbook` request (`limit` default 50, at most 200 by the protocol).
    public static func request(requestId: String, limit: Int?) -> JSON {
        var members: [JSON.Member] = [.init("requestId", .string(requestId)), .init("type", "logbook")]
        if let limit { members.append(.init("limit", .int(Int64(limit)))) }
        return .object(members)
    }

    /// Reads one entry of a response's `workouts`.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("a logbook entry must be an object") }
        let reader = PayloadReader(object: json)
        workoutId = try reader.string("workoutId")
        startedAt = (try? reader.int64("startedAt")) ?? 0
        endedAt = try? reader.int64("endedAt")
        origin = (try? reader.string("origin")) ?? "?"
        mode = (try? reader.string("mode")) ?? "?"
        summary = json["summary"].flatMap { try? WorkoutSummary(json: $0) }
    }

    /// The entries of a logbook response, newest first as sent.
    public static func entries(of response: JSON) throws(Rejection) -> [LogbookEntry] {
        guard case .array(let items)? = response["workouts"] else { return [] }
        var out: [LogbookEntry] = []
        for item in items { out.append(try LogbookEntry(json: item)) }
        return out
    }

    /// The entry as the response holds it.
    public var json: JSON {
        .obj([
            "workoutId": .string(workoutId),
            "startedAt": .int(startedAt),
            "endedAt": JSON(endedAt),
            "origin": .string(origin),
            "mode": .string(mode),
            "summary": summary?.json ?? .null,
        ])
    }
}
