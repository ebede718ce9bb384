import Logging
import TandemCore
import TandemEngine

/// What the pipeline tells the metrics, `/healthz` and the logs besides its own work.
extension CoordinatorService {
    /// A publication is being handed to the MQTT client at `now`: a receipt is timed from
    /// its message's arrival (recorded first, so that whoever has the receipt finds it
    /// counted), and logged (trace) with who sent what and what it got.
    func sending(_ publication: Publication, now: Millis) {
        guard let answered = publication.answers else { return }
        exporter.receiptSent(kind: answered.receipt.kind, afterMilliseconds: now - answered.arrivedAt)
        logger.trace("receipt", metadata: answered.logMetadata)
    }

    /// The broker connection came (`reconnect`: not the first time) or went: the leader
    /// is online only while connected.
    func connectionChanged(up: Bool, reconnect: Bool = false) {
        exporter.connection(up: up, reconnect: reconnect)
        health.setOnline(up)
    }
}

extension Publication.Answered {
    /// `user`, `kind`, `event.id`, `status`, `code`, `version`, and what it was about:
    /// `room`, `conversation` or `workout`.
    var logMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = [
            "user": "\(user)", "kind": "\(receipt.kind.rawValue)", "event.id": "\(receipt.id)",
            "status": "\(receipt.status.rawValue)",
        ]
        if let code = receipt.code { metadata["code"] = "\(code.rawValue)" }
        if let version = receipt.version { metadata["version"] = "\(version)" }
        if let target {
            switch receipt.kind {
            case .room: metadata["room"] = "\(target)"
            case .dm: metadata["conversation"] = "\(target)"
            case .workout: metadata["workout"] = "\(target)"
            }
        }
        return metadata
    }
}
