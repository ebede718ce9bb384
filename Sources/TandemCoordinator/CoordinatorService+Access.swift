import Logging
import TandemCore
import TandemEngine
import TandemMQTT

/// Room access on the broker: the database is the truth, the broker's dynamic-security
/// roles a projection of it (``BrokerAccessAdmin``). The leader reconciles them when its
/// term starts and whenever the admin connection comes back; each step's grants and
/// revocations are applied after its commit and before it is published.
extension CoordinatorService {
    /// Connects the admin client and reads the broker's users; nil (with one warning) when
    /// no admin account is configured. Each partition's term then reconciles its roles
    /// (``reconcileAtStart(_:on:partition:)``).
    /// `gate`: the leader lease's fence, closed once the lease is lost (nothing more is
    /// sent and the connection is never made again). The client id names this process
    /// (`{client-id}-admin-{instanceId}`), so an old leader's admin connection and the new
    /// leader's never take each other's place at the broker.
    func startBrokerAccess(gate: (@Sendable () -> Bool)?) async throws -> (admin: BrokerAccessAdmin, users: Set<String>)? {
        guard let username = configuration.brokerAdminUsername else {
            logger.warning("no broker admin account (--broker-admin-username): reads of rooms are not restricted by the broker; writes of non-members are still refused")
            return nil
        }
        let admin = BrokerAccessAdmin(
            configuration: MQTTConfiguration(
                host: configuration.host, port: configuration.port,
                clientId: "\(configuration.clientId)-admin-\(configuration.instanceId)",
                username: username, password: configuration.brokerAdminPassword,
                session: .cleanStart, tls: configuration.tls, gate: gate),
            topicRoot: configuration.engine.topicRoot, logger: logger, maxMessageBytes: BrokerAccessAdmin.defaultMaxMessageBytes, answerTimeout: .seconds(5))
        try await admin.start()
        return (admin, try await admin.knownUsers())
    }

    /// The partition whose room roles a partition's rooms are in (``RoomRoleNaming``):
    /// nil with one partition, whose roles have the names they had before partitions.
    func accessPartition(_ partition: Int) -> Int? {
        configuration.engine.partitioning.count > 1 ? partition : nil
    }

    /// Makes `partition`'s room roles match `desired` (its rooms) when its term starts:
    /// before anything of it is published.
    func reconcileAtStart(_ desired: [String: Set<String>], on admin: BrokerAccessAdmin, partition: Int?) async throws {
        let report = try await admin.reconcile(desired, partition: partition)
        logReconcile(report, reason: partition.map { "the term of partition \($0) started" } ?? "the term started")
    }

    /// Applies one step's changes; a refusal or a timeout is logged with its reason and
    /// followed by a reconcile, which retries until the broker matches.
    /// Returns false when the broker refused or did not answer: the caller asks for a
    /// reconcile, which retries what is still wrong.
    func apply(_ changes: [RoomAccessChange], on admin: BrokerAccessAdmin, partition: Int?) async -> Bool {
        do {
            try await admin.apply(changes, partition: partition)
            return true
        } catch {
            logger.error("the broker refused or did not answer room access changes; a reconcile retries them", error: error,
                         metadata: ["changes": "\(changes.count)"])
            return false
        }
    }

    func reconcile(_ desired: [String: Set<String>], on admin: BrokerAccessAdmin, partition: Int?, reason: String) async {
        do {
            logReconcile(try await admin.reconcile(desired, partition: partition), reason: reason)
        } catch {
            logger.error("room access reconcile failed (\(reason))", error: error)
        }
    }

    private func logReconcile(_ report: ReconcileReport, reason: String) {
        let level: Logger.Level = report.failures.isEmpty ? .info : .error
        let refused = report.failures.isEmpty ? "" : "; refused: \(report.failures.map(\.description).joined(separator: "; "))"
        logger.log(level: level, "room access reconciled (\(reason)): \(report.granted) granted, \(report.revoked) revoked, \(report.completed) completed, \(report.commands) commands in \(report.messages) messages\(refused)")
    }
}
