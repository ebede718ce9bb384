import TandemCore

/// A receipt that concerns this client, from ``TandemClient/receipts()``.
public enum ReceiptEvent: Sendable, Equatable {
    /// The first receipt of an event or command this client sent: `accepted` or
    /// `duplicate` acknowledge it, `rejected` says why not. A duplicate that carries
    /// its first copy's outcome counts as that outcome.
    case settled(Outgoing, Receipt)
    /// A flight or health sample of this user was rejected (telemetry gets a receipt
    /// only then; its id is `flight:<timestamp>` or `health:<timestamp>`). Every
    /// device of the user hears these.
    case telemetryRejected(Receipt)
}

/// What happened to the connection, from ``TandemClient/connectionChanges()``. A
/// client that cannot reach the broker keeps trying; these say when it starts and
/// stops trying, once each.
public enum ConnectionChange: Sendable, Equatable {
    /// The connection dropped (`reason` as the transport saw it); the client
    /// reconnects on its own.
    case lost(reason: String)
    /// Connected again: presence says online again and everything pending was resent.
    case restored
}
