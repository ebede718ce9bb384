import Logging
import Synchronization
import TandemCore
import TandemMQTT

/// Every coordinator process, leader or standby, says what it is on its own retained
/// `coordinator/instances/{instanceId}`, from a second MQTT connection (client id
/// `{client-id}-{instanceId}`) whose will says `{"online":false}`: operators and tests
/// can watch who runs and who leads. This connection never touches the shared client
/// id's session, so a standby can announce itself without disturbing the leader.
final class InstanceAnnouncer: Sendable {
    enum Role: Sendable {
        case standby
        /// `partitions`: those this process leads (CONTRACT "Partitions").
        case leader(term: Int64, partitions: [Int])
    }

    let client: MQTTClient
    let topic: String
    /// The role announced last: announced again after every reconnect (a broker that
    /// restarted may have published our will, or lost the retained copy).
    let role = Mutex<Role>(.standby)
    let startedAt: Millis
    let logger: Logger

    init(configuration: CoordinatorConfiguration, topics: Topics, startedAt: Millis, logger: Logger) throws {
        topic = topics.coordinatorInstance(configuration.instanceId)
        self.startedAt = startedAt
        self.logger = logger
        client = try MQTTClient(
            configuration: MQTTConfiguration(
                host: configuration.host,
                port: configuration.port,
                clientId: "\(configuration.clientId)-\(configuration.instanceId)",
                username: configuration.username,
                password: configuration.password,
                will: MQTTWill(topic: topic, payload: Self.offline, qos: .atLeastOnce, retain: true,
                               messageExpirySeconds: Self.crashedExpirySeconds),
                session: .cleanStart,
                tls: configuration.tls
            ),
            logger: logger
        )
    }

    static let offline = JSON.obj(["online": false]).serialized()
    /// How long the retained `{"online":false}` stays after a clean stop: long enough for
    /// a watcher to see it, short enough that restarts leave no trail.
    static let stoppedExpirySeconds: UInt32 = 60
    /// ... and after a crash (the will): an hour, to be seen by whoever looks into it.
    static let crashedExpirySeconds: UInt32 = 3600

    /// Connects in the background (announcements wait in the client's outbox meanwhile).
    func start() {
        let client = self.client
        let logger = self.logger
        Task {
            do {
                try await client.connect()
            } catch {
                logger.warning("the instance connection could not connect: \(error)")
            }
        }
        Task { [self] in
            var connections = 0
            for await event in client.events {
                guard case .connected = event else { continue }
                connections += 1
                if connections > 1 { role.withLock { publish($0) } }
            }
        }
    }

    /// Says `role`. The role is set and its message enqueued under one lock, so two
    /// threads announcing at once (a partition taken while another ends) leave the last
    /// role set as the last message retained, never an older one after it.
    func announce(_ role: Role) {
        self.role.withLock {
            $0 = role
            publish(role)
        }
    }

    /// Enqueues `role`'s message (with the role's lock held: messages leave in the
    /// order the roles were set).
    private func publish(_ role: Role) {
        var members: [JSON.Member] = [
            .init("online", true), .init("startedAt", .int(startedAt)), .init("version", .string(TandemVersion.current)),
        ]
        switch role {
        case .standby:
            members.append(.init("role", "standby"))
            members.append(.init("partitions", .array([])))
        case .leader(let term, let partitions):
            members.append(.init("role", "leader"))
            members.append(.init("term", .int(term)))
            members.append(.init("partitions", .array(partitions.map { .int(Int64($0)) })))
        }
        client.enqueueLogged(topic, payload: JSON.object(members).serialized(), retain: true, logger: logger)
    }

    /// A clean exit: `{"online":false}` retained (as the will would say) for a minute,
    /// after which the broker drops it, then DISCONNECT.
    func stop() async {
        do {
            try await client.publish(topic, payload: Self.offline, qos: .atLeastOnce, retain: true,
                                     messageExpirySeconds: Self.stoppedExpirySeconds)
        } catch {
            logger.debug("could not publish the instance's offline status: \(error)")
        }
        await client.disconnect()
    }
}
