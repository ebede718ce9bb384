import Logging
import Synchronization
import TandemCore
import TandemEngine
import TandemMQTT

/// Projects room membership onto the broker: who may read which room (its `state`,
/// `changes`, `events` and `cursors`) and publish on its own cursor level there, through
/// mosquitto's dynamic-security plugin (`$CONTROL/dynamic-security/v1`), over an MQTT
/// connection of its own as the coordinator's admin account (`coordinator-admin` in the
/// shipped configuration).
///
/// Each user NAME has the role `tandem-rooms-NAME` (attached to its client; overflow
/// roles `tandem-rooms-NAME:2`, ... when its rooms do not fit one control message)
/// holding, per room it is a member of, a publishClientReceive allow ACL for
/// `ROOT/rooms/ROOM/#` and a publishClientSend allow ACL for `ROOT/rooms/ROOM/cursors/NAME`
/// (``RoomRoleNaming``); this actor owns those roles.
///
/// - ``apply(_:partition:)`` grants and revokes single rooms by rewriting the affected
///   roles whole (`modifyRole`), which disconnects nobody: an invitee's subscription
///   delivers the room's next publication, and a revoked user receives nothing more of
///   the room, and publishes no more cursors there, from its next message on (mosquitto
///   checks read access on every delivery and write access on every publish).
/// - ``reconcile(_:partition:)`` reads the plugin's state and makes every room role
///   exactly the desired membership, sending only the differences, whole roles at a time
///   (`modifyRole`, which does not kick; a user who gained a room is kicked once, so that
///   its client subscribes again and receives the retained state). Rooms of a role
///   written before cursors (the read ACL alone) are completed without a kick.
/// - Every modifying command makes the plugin rewrite its whole file: batches keep the
///   count down, and nothing is sent when nothing differs.
///
/// Calls run one at a time, in call order. Each control message stays under
/// `maxMessageBytes` (the broker disconnects a client whose packet exceeds its
/// `max_packet_size`; ``defaultMaxMessageBytes`` by default, under the shipped
/// broker's 4 MiB: a role holds what one message holds, and each role costs the plugin
/// a rewrite of its file, so larger messages make a cold reconcile of 10,000 rooms
/// about three times faster than the 60,000 bytes of before).
public actor BrokerAccessAdmin {
    public static let controlTopic = "$CONTROL/dynamic-security/v1"
    public static let responseTopic = "$CONTROL/dynamic-security/v1/response"

    /// The admin connection's events (connected, disconnected with the reason), for one
    /// consumer: reconcile after every `.connected`, since whatever was sent while the
    /// connection was down, or the broker's file itself, may differ from what the
    /// coordinator knows.
    public nonisolated let connectionEvents: AsyncStream<MQTTConnectionEvent>
    private let eventsContinuation: AsyncStream<MQTTConnectionEvent>.Continuation

    public let configuration: MQTTConfiguration
    public let topicRoot: String
    /// The largest control message sent (the payload; the packet adds ~40 bytes).
    public let maxMessageBytes: Int
    /// How long a control message may go unanswered.
    public let answerTimeout: Duration
    private let logger: Logger
    private let router: ResponseRouter
    private var client: MQTTClient?
    private var eventsTask: Task<Void, Never>?
    private var busy = false
    private var queue: [CheckedContinuation<Void, Never>] = []

    public static let defaultMaxMessageBytes = 1_000_000

    public init(configuration: MQTTConfiguration, topicRoot: String, logger: Logger) {
        self.init(configuration: configuration, topicRoot: topicRoot, logger: logger, maxMessageBytes: Self.defaultMaxMessageBytes)
    }

    public init(
        configuration: MQTTConfiguration, topicRoot: String, logger: Logger, maxMessageBytes: Int,
        answerTimeout: Duration = .seconds(30)
    ) {
        self.configuration = configuration
        self.topicRoot = topicRoot
        self.logger = logger
        self.maxMessageBytes = max(maxMessageBytes, 1_000)
        self.answerTimeout = answerTimeout
        self.router = ResponseRouter(prefix: String(UInt64.random(in: 0...UInt64.max), radix: 36))
        (connectionEvents, eventsContinuation) = AsyncStream.makeStream(of: MQTTConnectionEvent.self, bufferingPolicy: .bufferingNewest(16))
    }

    /// Connects (retrying network failures, like every Tandem client; bad credentials
    /// throw) and subscribes to the plugin's responses.
    public func start() async throws {
        guard client == nil else { return }
        let client = try MQTTClient(configuration: configuration, logger: logger)
        self.client = client
        let router = router
        try await client.subscribe([Self.responseTopic], qos: .atMostOnce) { message in
            router.deliver(message.payload)
        }
        let continuation = eventsContinuation
        let logger = logger
        eventsTask = Task { [events = client.events] in
            for await event in events {
                if case .disconnected(let reason) = event {
                    router.failAll("the admin connection dropped: \(reason)")
                }
                logger.debug("broker admin connection: \(event)")
                continuation.yield(event)
            }
        }
        try await client.connect()
    }

    public func stop() async {
        router.failAll("the admin client stopped")
        await client?.disconnect()
        eventsTask?.cancel()
        eventsTask = nil
        eventsContinuation.finish()
        client = nil
    }

    /// The broker's Tandem users: clients with the roles of one (`tandem-client`,
    /// `tandem-user-NAME` or a room role of their own), not the coordinator or admins.
    public func knownUsers() async throws -> Set<String> {
        try await exclusively {
            let answers = try await exchange([.obj(["command": "listClients", "verbose": true])])
            let answer = try Self.success(answers[0])
            let state = try DynsecState(listClients: answer, listRoles: .obj(["data": .obj(["roles": .array([])])]))
            return Set(state.clientRoles.keys.filter { state.isTandemUser($0) })
        }
    }

    /// What the broker lets each Tandem user read now: userId -> the rooms its room roles
    /// let it read (for checks and operators).
    public func readableRooms() async throws -> [String: Set<String>] {
        try await roomGrants().mapValues { Set($0.filter { $0.value.contains(.read) }.keys) }
    }

    /// What each Tandem user's room roles grant it now, room by room, every partition's
    /// roles together (the ACL's topic names the room whoever wrote it).
    func roomGrants() async throws -> [String: [String: Set<RoomGrant>]] {
        try await exclusively {
            let answers = try await exchange([
                .obj(["command": "listClients", "verbose": true]),
                .obj(["command": "listRoles", "verbose": true]),
            ])
            let state = try DynsecState(listClients: try Self.success(answers[0]), listRoles: try Self.success(answers[1]))
            let naming = RoomRoleNaming(root: topicRoot)
            var grants: [String: [String: Set<RoomGrant>]] = [:]
            for (user, roles) in state.clientRoles where state.isTandemUser(user) {
                var rooms: [String: Set<RoomGrant>] = [:]
                for role in roles where RoomRoleNaming.parse(role)?.user == user {
                    rooms.merge(naming.grants(state.roleACLs[role] ?? [], user: user)) { $0.union($1) }
                }
                grants[user] = rooms
            }
            return grants
        }
    }

    /// Makes every room role exactly `desired` (userId -> the rooms it may read; a
    /// Tandem user left out may read none). Idempotent: a second call sends nothing.
    /// Users given rooms who are not broker clients are listed in the report, as are
    /// invalid room ids and commands the broker refused; everything else is applied.
    /// `partition`: whose roles (``RoomRoleNaming``); nil with one partition. Only that
    /// partition's roles are read and written: `desired` holds its rooms alone.
    public func reconcile(_ desired: [String: Set<String>], partition: Int? = nil) async throws -> ReconcileReport {
        let naming = RoomRoleNaming(root: topicRoot, partition: partition)
        return try await exclusively {
            let answers = try await exchange([
                .obj(["command": "listClients", "verbose": true]),
                .obj(["command": "listRoles", "verbose": true]),
            ])
            let state = try DynsecState(listClients: try Self.success(answers[0]), listRoles: try Self.success(answers[1]))
            var plan = ReconcilePlan(desired: desired, state: state, naming: naming, shardBytes: maxMessageBytes - 1_000)
            let (replies, messages) = try await send(plan.commands)
            plan.report.messages = 1 + messages
            for (index, reply) in replies.enumerated() {
                if let error = reply["error"]?.stringValue {
                    let subject = plan.subjects[index]
                    plan.report.failures.append(BrokerAccessFailure(
                        user: subject.user, room: subject.room,
                        command: plan.commands[index]["command"]?.stringValue ?? "?", reason: error))
                }
            }
            if !plan.commands.isEmpty {
                logger.info("broker access reconciled: \(plan.report.granted) granted, \(plan.report.revoked) revoked, \(plan.report.completed) completed, \(plan.report.changedUsers.count) users, \(plan.report.commands) commands in \(plan.report.messages) messages, \(plan.report.failures.count) refused")
            }
            return plan.report
        }
    }

    /// Grants and revokes, in order. Returns when the broker has answered every command;
    /// throws ``BrokerAccessError/refused(_:)`` naming each refused change (a user who is
    /// not a broker client: "Client not found"; an invalid id) after the others were
    /// applied. Granting a room already granted, or revoking one not granted, is no error.
    /// `partition`: whose roles, as for ``reconcile(_:partition:)``.
    public func apply(_ changes: [RoomAccessChange], partition: Int? = nil) async throws {
        guard !changes.isEmpty else { return }
        let naming = RoomRoleNaming(root: topicRoot, partition: partition)
        try await exclusively {
            var failures: [BrokerAccessFailure] = []
            var valid: [RoomAccessChange] = []
            for change in changes {
                if !Identifier.isValid(change.user) || !Identifier.isValid(change.room) {
                    failures.append(BrokerAccessFailure(
                        user: change.user, room: change.room, command: "validate",
                        reason: "not a \(Identifier.isValid(change.user) ? "room" : "user") id (1-64 of A-Z a-z 0-9 _ . -)"))
                } else {
                    valid.append(change)
                }
            }
            var users: [String] = []
            for change in valid where !users.contains(change.user) { users.append(change.user) }
            // Which room roles each user's client has: grants go to its first, revokes to all.
            var roles: [String: [String]] = [:]
            if !users.isEmpty {
                let (answers, _) = try await send(users.map { .obj(["command": "getClient", "username": .string($0)]) })
                for (user, answer) in zip(users, answers) {
                    if let error = answer["error"]?.stringValue {
                        for change in valid where change.user == user {
                            failures.append(BrokerAccessFailure(user: user, room: change.room, command: "getClient", reason: error))
                        }
                    } else {
                        roles[user] = DynsecState.roleNames(answer["data"]?["client"]?["roles"])
                            .filter { naming.owns($0)?.user == user }
                    }
                }
            }
            // Each affected room role is read and written back whole with modifyRole,
            // which (unlike addRoleACL and removeRoleACL in 2.0.11) kicks nobody: a
            // member keeps its connection, reads the room's next publication (the
            // snapshot of the step that invited it) at once, and a removed one stops
            // receiving with the next delivery and publishing cursors with its next one.
            var shardsOf: [String: [String]] = [:]
            var readRoles: [String] = []
            for user in users {
                guard let shards = roles[user] else { continue }
                let base = naming.role(user)
                shardsOf[user] = shards.contains(base) ? shards : [base] + shards
                readRoles += shards
            }
            var current: [String: [DynsecACL]] = [:]
            if !readRoles.isEmpty {
                let (answers, _) = try await send(readRoles.map { .obj(["command": "getRole", "rolename": .string($0)]) })
                for (rolename, answer) in zip(readRoles, answers) {
                    var acls: [DynsecACL] = []
                    if case .array(let list)? = answer["data"]?["role"]?["acls"] {
                        for acl in list {
                            guard let type = acl["acltype"]?.stringValue, let topic = acl["topic"]?.stringValue else { continue }
                            acls.append(DynsecACL(type: type, topic: topic, allow: acl["allow"]?.boolValue ?? false))
                        }
                    }
                    current[rolename] = acls
                }
            }
            var commands: [JSON] = []
            var subjects: [(change: RoomAccessChange, ignorable: String?)] = []
            for user in users {
                guard let shards = shardsOf[user] else { continue }
                let base = naming.role(user)
                let first = valid.first { $0.user == user }!
                if current[base] == nil {
                    // Made by hand without its room role: give it one (it may exist unattached).
                    commands.append(.obj(["command": "createRole", "rolename": .string(base), "acls": .array([])]))
                    commands.append(ReconcilePlan.attach(user, base))
                    subjects.append((first, "Role already exists"))
                    subjects.append((first, nil))
                    current[base] = []
                }
                var after = current
                for change in valid where change.user == user {
                    let acls = naming.acls(change.room, user: user)
                    switch change {
                    case .grant:
                        // Where the room is (a role written before cursors holds its read
                        // ACL alone: completed there), else in the first role.
                        let home = shards.first { shard in acls.contains { after[shard]?.contains($0) == true } } ?? base
                        after[home, default: []] += acls.filter { !(after[home] ?? []).contains($0) }
                    case .revoke:
                        for shard in shards { after[shard]?.removeAll { acls.contains($0) } }
                    }
                }
                for shard in shards where after[shard] != current[shard] {
                    commands.append(.obj(["command": "modifyRole", "rolename": .string(shard), "acls": .array((after[shard] ?? []).map(\.json))]))
                    subjects.append((first, nil))
                }
            }
            let (answers, _) = try await send(commands)
            var seen = Set<BrokerAccessFailure>()
            for (index, answer) in answers.enumerated() {
                guard let error = answer["error"]?.stringValue, error != subjects[index].ignorable else { continue }
                let change = subjects[index].change
                let failure = BrokerAccessFailure(
                    user: change.user, room: change.room, command: commands[index]["command"]?.stringValue ?? "?", reason: error)
                if seen.insert(failure).inserted { failures.append(failure) }
            }
            if !failures.isEmpty { throw BrokerAccessError.refused(failures) }
        }
    }

    // MARK: - Exchanges

    /// Runs `body` when no other call is running (calls run in the order they came).
    private func exclusively<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        if busy {
            await withCheckedContinuation { queue.append($0) }
        }
        busy = true
        defer {
            if queue.isEmpty { busy = false } else { queue.removeFirst().resume() }
        }
        return try await body()
    }

    /// Sends `commands` in as few control messages as fit `maxMessageBytes`, in order,
    /// and returns the answers in the same order, and how many messages it took.
    private func send(_ commands: [JSON]) async throws -> (answers: [JSON], messages: Int) {
        var batches: [[JSON]] = []
        var size = 0
        for command in commands {
            let bytes = command.serialized().count + 40
            if batches.isEmpty || size + bytes > maxMessageBytes - 32 {
                batches.append([])
                size = 0
            }
            batches[batches.count - 1].append(command)
            size += bytes
        }
        var answers: [JSON] = []
        for batch in batches {
            answers += try await exchange(batch)
        }
        return (answers, batches.count)
    }

    /// One control message, and its answers in command order.
    private func exchange(_ commands: [JSON]) async throws -> [JSON] {
        guard let client else { throw BrokerAccessError.noAnswer("the admin client is not started") }
        let (id, tagged) = router.register(commands)
        let payload = JSON.obj(["commands": .array(tagged)]).serialized()
        // Handed over, not awaited: publish would wait for a PUBACK for as long as the
        // connection is down; the answer's timeout bounds every exchange instead (a
        // message still in the outbox then goes out later, harmlessly: changes are
        // idempotent, and the reconcile after the reconnect makes the broker right).
        do {
            try client.enqueue(Self.controlTopic, payload: payload, qos: .atLeastOnce)
        } catch {
            router.fail(id, "publishing the control message failed: \(error)")
        }
        return try await router.wait(id, timeout: answerTimeout)
    }

    static func success(_ answer: JSON) throws -> JSON {
        if let error = answer["error"]?.stringValue {
            throw BrokerAccessError.refused([BrokerAccessFailure(
                user: "", room: nil, command: answer["command"]?.stringValue ?? "?", reason: error)])
        }
        return answer
    }
}

/// Matches the plugin's answers (QoS 0 on the shared response topic, read by every
/// admin) to the control messages this client sent, by each command's `correlationData`:
/// `PREFIX-MESSAGE.INDEX`, PREFIX random per client.
final class ResponseRouter: Sendable {
    struct Pending {
        var answers: [JSON?]
        var missing: Int
        var continuation: CheckedContinuation<[JSON], any Error>?
        var failure: BrokerAccessError?
    }

    let prefix: String
    private let state = Mutex<(next: UInt64, pending: [UInt64: Pending])>((1, [:]))

    init(prefix: String) {
        self.prefix = prefix
    }

    func register(_ commands: [JSON]) -> (UInt64, [JSON]) {
        let id = state.withLock { s -> UInt64 in
            defer { s.next += 1 }
            s.pending[s.next] = Pending(answers: Array(repeating: nil, count: commands.count), missing: commands.count)
            return s.next
        }
        let tagged = commands.enumerated().map { index, command -> JSON in
            guard case .object(var members) = command else { return command }
            members.append(JSON.Member("correlationData", .string("\(prefix)-\(id).\(index)")))
            return .object(members)
        }
        return (id, tagged)
    }

    /// Called on the MQTT client's thread with each message on the response topic.
    func deliver(_ payload: [UInt8]) {
        guard let tree = try? JSON.parse(payload), case .array(let responses)? = tree["responses"] else { return }
        var done: [(CheckedContinuation<[JSON], any Error>, [JSON])] = []
        state.withLock { s in
            for response in responses {
                guard let tag = response["correlationData"]?.stringValue, tag.hasPrefix(prefix + "-") else { continue }
                let parts = tag.dropFirst(prefix.count + 1).split(separator: ".")
                guard parts.count == 2, let id = UInt64(parts[0]), let index = Int(parts[1]),
                      var pending = s.pending[id], pending.answers.indices.contains(index), pending.answers[index] == nil
                else { continue }
                pending.answers[index] = response
                pending.missing -= 1
                if pending.missing == 0, let continuation = pending.continuation {
                    s.pending[id] = nil
                    done.append((continuation, pending.answers.map { $0! }))
                } else {
                    s.pending[id] = pending
                }
            }
        }
        for (continuation, answers) in done { continuation.resume(returning: answers) }
    }

    func wait(_ id: UInt64, timeout: Duration) async throws -> [JSON] {
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { self?.fail(id, "no answer within \(timeout)") }
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[JSON], any Error>) in
            let outcome = state.withLock { s -> Result<[JSON], BrokerAccessError>? in
                guard var pending = s.pending[id] else { return .failure(.noAnswer("unknown control message")) }
                if let failure = pending.failure {
                    s.pending[id] = nil
                    return .failure(failure)
                }
                if pending.missing == 0 {
                    s.pending[id] = nil
                    return .success(pending.answers.map { $0! })
                }
                pending.continuation = continuation
                s.pending[id] = pending
                return nil
            }
            if let outcome { continuation.resume(with: outcome.mapError { $0 as any Error }) }
        }
    }

    func fail(_ id: UInt64, _ why: String) {
        let continuation = state.withLock { s -> CheckedContinuation<[JSON], any Error>? in
            guard var pending = s.pending[id] else { return nil }
            if let continuation = pending.continuation {
                s.pending[id] = nil
                return continuation
            }
            pending.failure = .noAnswer(why)
            s.pending[id] = pending
            return nil
        }
        continuation?.resume(throwing: BrokerAccessError.noAnswer(why))
    }

    func failAll(_ why: String) {
        let ids = state.withLock { Array($0.pending.keys) }
        for id in ids { fail(id, why) }
    }
}
