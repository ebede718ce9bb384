/// Why a ``TandemClient`` call failed, said so that a person can act on it.
public enum TandemClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The broker was not reached within the timeout given to
    /// ``TandemClient/connect(timeout:)``. `problem` is why the last attempt failed, as
    /// the transport saw it; nil when a connection opened but nothing answered MQTT
    /// (a port that is not a broker, or a TLS listener dialled in clear).
    case unreachable(problem: String?, timeout: Duration)
    /// The transport gave up connecting for good: refused credentials, a TLS
    /// certificate that does not verify. Retrying does not help.
    case connectFailed(reason: String)
    /// ``TandemClient/settle(timeout:)`` gave up on this event or command before its
    /// receipt came.
    case noReceipt(id: String)
    /// A query got no response in time (the coordinator is down, or the request was lost
    /// and so were its resends).
    case noResponse(requestId: String, timeout: Duration)
    /// The coordinator answered a query with an error (`invalid_payload`,
    /// `rate_limited`).
    case queryRejected(code: String, message: String)
    /// The client was closed while this waited.
    case closed

    public var description: String {
        switch self {
        case .unreachable(let problem, let timeout):
            problem ?? "no MQTT answer within \(timeout)"
        case .connectFailed(let reason):
            reason
        case .noReceipt(let id):
            "no receipt for \(id)"
        case .noResponse(let requestId, let timeout):
            "no response to \(requestId) within \(timeout.components.seconds) s (is the coordinator running?)"
        case .queryRejected(let code, let message):
            "\(code): \(message)"
        case .closed:
            "the client was closed"
        }
    }
}
