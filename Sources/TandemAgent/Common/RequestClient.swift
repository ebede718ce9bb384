import TandemCore
import TandemMQTT

/// The request/response side protocol (DM history, logbook): a request on
/// `users/{user}/requests`, its answer on `users/{user}/responses` under the same
/// `requestId`. Resent with the same id every `resendInterval` without an answer; given
/// up after `timeout`.
public struct RequestClient: Sendable {
    public let session: AgentSession
    public var resendInterval: Duration
    public var timeout: Duration

    public init(session: AgentSession, resendInterval: Duration = .seconds(3), timeout: Duration = .seconds(15)) {
        self.session = session
        self.resendInterval = resendInterval
        self.timeout = timeout
    }

    /// Subscribes to the responses; call before `AgentSession.connect()`.
    public func subscribe() async throws -> MQTTSubscription {
        try await session.subscribe([session.topics.responses(user: session.user)])
    }

    /// Publishes `request` (which must carry `requestId`) and returns the response's
    /// object. An `error` member in the response is thrown as an AgentError.
    public func send(_ request: JSON, requestId: String, responses: MQTTSubscription) async throws -> JSON {
        let topic = session.topics.requests(user: session.user)
        let payload = request.serialized()
        let resendInterval = resendInterval
        let timeout = timeout
        let client = session.client
        let logger = session.logger
        let response: JSON = try await withThrowingTaskGroup(of: JSON?.self) { group in
            group.addTask {
                for try await message in responses {
                    guard let json = try? JSON.parse(message.payload), json["requestId"]?.stringValue == requestId else { continue }
                    return json
                }
                return nil
            }
            group.addTask {
                let deadline = ContinuousClock.now + timeout
                while ContinuousClock.now < deadline {
                    do {
                        try await client.publish(topic, payload: payload, qos: .atLeastOnce, retain: false)
                    } catch is CancellationError {
                        return nil
                    } catch {
                        logger.info("request \(requestId) not published (\(error)); retrying")
                    }
                    try await Task.sleep(for: min(resendInterval, deadline - ContinuousClock.now))
                }
                throw AgentError("no response to \(requestId) within \(timeout.components.seconds) s (is the coordinator running?)")
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let json = result { return json }
            }
            throw AgentError("the connection closed before a response to \(requestId)")
        }
        if let error = response["error"], case .object = error {
            let code = error["code"]?.stringValue ?? "error"
            let message = error["message"]?.stringValue ?? ""
            throw AgentError("\(code): \(message)")
        }
        return response
    }
}
