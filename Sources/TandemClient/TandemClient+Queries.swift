import TandemCore

extension TandemClient {
    // MARK: Queries

    /// How often a query without a response is asked again (same requestId).
    public static let queryResendInterval: Duration = .seconds(3)
    /// How long a query waits for its response.
    public static let queryTimeout: Duration = .seconds(15)

    /// One page of the conversation with `peer` from the coordinator's history, oldest
    /// first: the messages sent strictly before `before` (nil: the newest), at most
    /// `limit` (1-200; nil: the coordinator's 50). `hasMore` says whether older ones exist.
    ///
    /// - Throws: ``TandemClientError/noResponse(requestId:timeout:)`` when the
    ///   coordinator does not answer within ``queryTimeout``,
    ///   ``TandemClientError/queryRejected(code:message:)`` when it refuses.
    public func dmHistory(with peer: String, before: Millis? = nil, limit: Int? = nil) async throws -> DMHistoryPage {
        let response = try await query { DMHistoryPage.request(requestId: $0, peer: peer, before: before, limit: limit) }
        return try DMHistoryPage(json: response)
    }

    /// This user's finished workouts with their summaries, newest first, at most
    /// `limit` (1-200; nil: the coordinator's 50). Throws as ``dmHistory(with:before:limit:)``.
    public func logbook(limit: Int? = nil) async throws -> [LogbookEntry] {
        let response = try await query { LogbookEntry.request(requestId: $0, limit: limit) }
        return try LogbookEntry.entries(of: response)
    }

    /// Publishes the request `makeRequest` builds for a fresh requestId on
    /// `users/{user}/requests`, again every ``queryResendInterval`` without an answer,
    /// and returns the answer on `users/{user}/responses` with that requestId.
    func query(_ makeRequest: (String) -> JSON) async throws -> JSON {
        if !followingResponses {
            followingResponses = true
            try await follow([topics.responses(user: user)]) { $0.receive(response: $1) }
        }
        let requestId = ids.next()
        let payload = makeRequest(requestId).serialized()
        queries[requestId] = .waiting(nil)
        defer { queries[requestId] = nil }
        let response: JSON = try await withThrowingTaskGroup(of: JSON?.self) { group in
            group.addTask { try await self.response(to: requestId) }
            group.addTask { try await self.ask(requestId, payload) }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let json = result { return json }
            }
            throw TandemClientError.closed
        }
        if let error = response["error"], case .object = error {
            throw TandemClientError.queryRejected(code: error["code"]?.stringValue ?? "error", message: error["message"]?.stringValue ?? "")
        }
        return response
    }

    /// Publishes a request until ``queryTimeout`` passes (the response ends it first).
    private nonisolated func ask(_ requestId: String, _ payload: [UInt8]) async throws -> JSON? {
        let topic = topics.requests(user: user)
        let deadline = ContinuousClock.now + Self.queryTimeout
        while ContinuousClock.now < deadline {
            do {
                try await transport.publish(topic, payload: payload, retain: false)
            } catch is CancellationError {
                return nil
            } catch {
                logger.info("request \(requestId) not published (\(error)); retrying")
            }
            try await Task.sleep(for: min(Self.queryResendInterval, deadline - ContinuousClock.now))
        }
        throw TandemClientError.noResponse(requestId: requestId, timeout: Self.queryTimeout)
    }

    /// The response to `requestId`, once it has come.
    private func response(to requestId: String) async throws -> JSON? {
        if case .answered(let json)? = queries[requestId] { return json }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSON, any Error>) in
                if case .answered(let json)? = queries[requestId] {
                    continuation.resume(returning: json)
                } else if queries[requestId] == nil || Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    queries[requestId] = .waiting(continuation)
                }
            }
        } onCancel: {
            Task { await self.stopWaiting(for: requestId) }
        }
    }

    private func stopWaiting(for requestId: String) {
        guard case .waiting(let continuation?)? = queries[requestId] else { return }
        queries[requestId] = .waiting(nil)
        continuation.resume(throwing: CancellationError())
    }

    private func receive(response message: TransportMessage) {
        guard let json = try? JSON.parse(message.payload), let requestId = json["requestId"]?.stringValue,
              case .waiting(let continuation)? = queries[requestId] else { return }
        if let continuation {
            queries[requestId] = nil
            continuation.resume(returning: json)
        } else {
            queries[requestId] = .answered(json)
        }
    }
}
