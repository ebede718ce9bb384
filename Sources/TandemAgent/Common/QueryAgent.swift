import TandemCore

/// The one-shot modes, queries answered by the coordinator: `dm history`, `room history`
/// and `logbook`.
public struct QueryAgent: Sendable {
    public let session: AgentSession
    private var console: Console { session.console }

    public init(session: AgentSession) {
        self.session = session
    }

    /// Connects, asks, and closes before the answer is printed.
    private func ask<Answer: Sendable>(_ question: (TandemClient) async throws -> Answer) async throws -> Answer {
        try await session.connect()
        let answer = try await question(session.client)
        await session.close()
        return answer
    }

    /// Prints one page of the conversation with `peer`, oldest first. Returns the exit code.
    public func history(peer: String, before: Millis?, limit: Int?) async throws -> Int32 {
        let page = try await ask { try await $0.dmHistory(with: peer, before: before, limit: limit) }
        if console.json {
            for m in page.messages { console.object(.obj(["type": "message", "peer": .string(peer), "message": m.json])) }
            console.object(.obj(["type": "page", "peer": .string(peer), "count": .int(Int64(page.messages.count)),
                                 "hasMore": .bool(page.hasMore), "oldest": JSON(page.messages.first?.sentAt)]))
            return 0
        }
        if page.messages.isEmpty {
            console.line("no messages with \(peer)\(before.map { " before \(Format.dateTime($0))" } ?? "")")
        }
        for m in page.messages {
            console.line(ConversationBook.messageLine(m, user: session.user, peer: peer, withDate: true))
        }
        if page.hasMore, let oldest = page.messages.first?.sentAt {
            console.line("… older messages: tandem-agent dm history \(peer) --before \(oldest)")
        }
        return 0
    }

    /// Prints a page of a room's changes, newest first. Returns the exit code.
    public func roomHistory(room: String, before: Int64?, limit: Int?) async throws -> Int32 {
        let answer = try await ask { try await $0.history(room: room, before: before, limit: limit) }
        if console.json {
            console.object(RoomTable.historyJSON(answer))
            return 0
        }
        console.line(RoomTable.history(answer, limit: limit ?? ClientRequest.defaultLimit) {
            "tandem-agent room history --room \(room) --before \($0)"
        })
        return 0
    }

    /// Prints the finished workouts, newest first. Returns the exit code.
    public func logbook(limit: Int?) async throws -> Int32 {
        let entries = try await ask { try await $0.logbook(limit: limit) }
        if console.json {
            for e in entries { console.object(e.json.typed("workout")) }
            return 0
        }
        console.line(LogbookEntry.table(entries))
        return 0
    }
}

extension LogbookEntry {
    public static func table(_ entries: [LogbookEntry]) -> String {
        guard !entries.isEmpty else { return "no finished workouts" }
        var table = TextTable(headers: ["WORKOUT", "STARTED", "ORIGIN", "MODE", "DISTANCE", "TIME", "PACE", "AVG HR", "MAX HR"])
        for e in entries {
            let s = e.summary
            table.rows.append([
                e.workoutId, Format.dateTime(e.startedAt), e.origin, e.mode,
                Format.distance(s?.distance ?? 0), Format.duration(s?.elapsedTime ?? 0), Format.pace(s?.averagePace),
                // Whole beats per minute, as the workout agent's own summary prints them.
                s?.averageHeartRate.map { Format.number($0.rounded()) } ?? "-", s?.maxHeartRate.map { Format.number($0.rounded()) } ?? "-",
            ])
        }
        return table.rendered()
    }
}
