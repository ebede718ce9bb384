import TandemCore

extension TandemClient {
    // MARK: History and restore

    /// One page of `room`'s history from the coordinator: its changes with a version
    /// below `before` (nil: all), newest first, at most `limit` (1-200; nil: the
    /// coordinator's 50), with the room's current version, the oldest version a restore
    /// can reach, and the epoch they belong to.
    ///
    /// - Throws: ``TandemClientError/queryRejected(code:message:)`` with `not_member`
    ///   when this user is not a member of the room or it does not exist (`invalid_payload`
    ///   for a bad `before` or `limit`, `rate_limited`), and as ``dmHistory(with:before:limit:)``
    ///   otherwise.
    public func history(room: String, before: Int64? = nil, limit: Int? = nil) async throws -> RoomHistoryAnswer {
        let response = try await query { RoomHistoryAnswer.request(requestId: $0, roomId: room, before: before, limit: limit) }
        return try RoomHistoryAnswer(json: response)
    }

    /// Returns `room` to what it was right after `version` (a version the history shows,
    /// at least its `oldest`, below the current one): its stickers become exactly what
    /// they were then, every lock released; membership does not change. One new version.
    /// Returns the receipt: rejected `forbidden` for a viewer, `invalid_payload` for a
    /// version not below the current one, `history_gone` for one older than the history
    /// keeps.
    public func restore(room: String, to version: Int64, timestamp: Millis = WallClock.now()) async throws -> Receipt {
        let event = EditEvent(eventId: ids.next(), restoringTo: version, timestamp: timestamp)
        return try await send(event, in: room, label: "restore \(room) to version \(version)")
    }
}
