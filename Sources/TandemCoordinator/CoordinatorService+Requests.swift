import Logging
import TandemCore
import TandemEngine
import TandemMQTT
import TandemStore

/// Queries (DM history, logbook): read from the query reader (a connection of its own,
/// beside the pipeline) and answered on
/// `users/{userId}/responses`. They bypass the reorder buffer: they change nothing.
/// Decoding, refusals and the rate limit are the engine's (`Engine.ingestQuery`).
extension CoordinatorService {
    /// Reads what a query asks for and answers it (the engine already decoded and
    /// rate-limited it). Returns false when the store could not be read (the client is
    /// told so; the metrics count it as an error).
    @discardableResult
    func answer(_ query: Engine.Query, store: any CoordinatorStore, client: MQTTClient) async -> Bool {
        let request = query.request
        let response: JSON
        var answered = true
        do {
            response = try await respond(to: request, from: query.user, store: store)
        } catch {
            answered = false
            logger.error("answering a query failed", error: error, metadata: [
                "user": "\(query.user)", "request.id": "\(request.requestId)", "request.type": "\(request.kind.rawValue)",
            ])
            response = ClientRequest.errorResponse(requestId: request.requestId, kind: request.kind.rawValue, .invalid("the coordinator could not read its database"))
        }
        client.enqueueLogged(topics.responses(user: query.user), payload: response.serialized(), retain: false, logger: logger)
        return answered
    }

    private func respond(to request: ClientRequest, from user: String, store: any CoordinatorStore) async throws -> JSON {
        switch request.kind {
        case .dmHistory:
            let peer = request.peer ?? ""
            let key = ConversationKey(user, peer).description
            // One more than asked tells whether there is more before this page.
            let rows = try await store.messages(conversation: key, before: request.before, limit: request.limit + 1)
            let page = rows.prefix(request.limit).reversed()
            let messages: [JSON] = page.map {
                DirectMessage(id: $0.id, sender: $0.sender, text: $0.text, sentAt: $0.sentAt, isRead: $0.isRead).json
            }
            return .obj([
                "requestId": .string(request.requestId),
                "type": .string(request.kind.rawValue),
                "peer": .string(peer),
                "messages": .array(messages),
                "hasMore": .bool(rows.count > request.limit),
            ])
        case .dmChanges:
            // Answered by the engine from memory (Engine.dmChangesResponse); never handed here.
            return ClientRequest.errorResponse(requestId: request.requestId, kind: request.kind.rawValue, .invalid("dmChanges is answered by the pipeline"))
        case .roomHistory:
            let roomId = request.roomId ?? ""
            guard let page = try await store.roomHistory(room: roomId, user: user, before: request.before, limit: request.limit) else {
                return ClientRequest.errorResponse(
                    requestId: request.requestId, kind: request.kind.rawValue,
                    Rejection(.notMember, "\(user) is not a member of room \(roomId), or it does not exist"))
            }
            return RoomHistory.response(requestId: request.requestId, roomId: roomId, epoch: store.epoch, page: page)
        case .logbook:
            let rows = try await store.logbook(user: user, limit: request.limit)
            let workouts: [JSON] = rows.map { row in
                .obj([
                    "workoutId": .string(row.workoutId),
                    "startedAt": .int(row.startedAt),
                    "endedAt": .int(row.endedAt),
                    "origin": .string(row.origin),
                    "mode": .string(row.mode),
                    "summary": WorkoutSummary(
                        distance: row.distance, elapsedTime: row.elapsedTime, averagePace: row.averagePace,
                        averageHeartRate: row.averageHeartRate, maxHeartRate: row.maxHeartRate).json,
                ])
            }
            return .obj([
                "requestId": .string(request.requestId),
                "type": .string(request.kind.rawValue),
                "workouts": .array(workouts),
            ])
        }
    }
}
