import Logging
import TandemCore

/// What an app needs to take part in Tandem: presence, rooms, conversations and
/// workouts, with receipts, resends and replicas handled for it.
///
/// ```swift
/// let transport = try MosquittoTransport(host: "127.0.0.1", port: 1883, username: "alice",
///                                        password: "alice-demo", user: "alice", clientId: "alice-phone")
/// let client = TandemClient(transport: transport, user: "alice", clientId: "alice-phone")
/// try await client.connect()
/// let room = try await client.room("q1")
/// let receipt = try await client.edit(.create, sticker: "s1", in: "q1", image: "a.png",
///                                     frame: Frame(x: 0, y: 0, width: 10, height: 10))
/// for await replica in room { show(replica.visibleStickers) }
/// ```
///
/// Every event and command is sent at least once: it stays pending under its id, is
/// resent under the same id after ``resendAfter`` without a receipt and after every
/// reconnect, and the call that sent it returns the receipt. The coordinator
/// deduplicates by id, so a resend is never applied twice.
public actor TandemClient {
    /// The contract's presence payloads.
    public static let online = JSON.obj(["online": true]).serialized()
    public static let offline = JSON.obj(["online": false]).serialized()

    public nonisolated let user: String
    public nonisolated let clientId: String
    public nonisolated let topics: Topics
    /// Where this client says it is online; the transport's will says offline there.
    public nonisolated var presenceTopic: String { topics.presence(user: user, clientId: clientId) }
    /// Flight samples closer together than this are not published (the contract's
    /// default throttle is 3 s).
    public nonisolated let flightInterval: Millis

    private let transport: any TandemTransport
    private let logger: Logger
    private let sender: ReliableSender
    private var ids: IdentifierGenerator
    private var waiters: [String: CheckedContinuation<Receipt, any Error>] = [:]
    private var rooms: [String: RoomWatch] = [:]
    private var conversations: [String: ConversationWatch] = [:]
    private var workouts: [String: Broadcast<WorkoutSnapshot>] = [:]
    private var lastFlight: [String: Millis] = [:]
    private var tasks: [Task<Void, Never>] = []
    private var connected = false

    private struct RoomWatch {
        var replica: RoomReplica
        var broadcast = Broadcast<RoomReplica>()
    }

    private struct ConversationWatch {
        var replica: ConversationReplica
        var broadcast = Broadcast<ConversationReplica>()
    }

    /// - Parameters:
    ///   - transport: how to reach the broker; its will must say offline on
    ///     ``presenceTopic`` (``MosquittoTransport`` sets it).
    ///   - user: the userId this client acts as (the MQTT username under the demo ACL).
    ///   - clientId: stable per user and device ("alice-phone"), so the broker keeps one
    ///     presence entry per live client.
    ///   - resendAfter: milliseconds without a receipt before a resend.
    public init(
        transport: any TandemTransport, user: String, clientId: String, topics: Topics = Topics(),
        resendAfter: Millis = 5_000, flightInterval: Millis = 3_000, logger: Logger = Logger(label: "tandem.client")
    ) {
        self.transport = transport
        self.user = user
        self.clientId = clientId
        self.topics = topics
        self.flightInterval = flightInterval
        self.logger = logger
        sender = ReliableSender(transport: transport, logger: logger, resendAfter: resendAfter)
        ids = IdentifierGenerator(user: user)
    }

    // MARK: Connection and presence

    /// Subscribes to this user's receipts, connects, and says online. After a reconnect
    /// it says online again and resends everything pending.
    public func connect() async throws {
        guard !connected else { return }
        let receipts = try await transport.subscribe([topics.receipts(user: user)])
        let events = transport.events
        try await transport.connect()
        try await transport.publish(presenceTopic, payload: Self.online, retain: true)
        connected = true
        tasks.append(Task { [weak self] in
            do {
                for try await message in receipts { await self?.take(receiptMessage: message) }
            } catch {}
        })
        tasks.append(Task { [weak self, transport, presenceTopic] in
            var dropped = false
            for await event in events {
                switch event {
                case .disconnected: dropped = true
                case .connected:
                    guard dropped else { continue }
                    dropped = false
                    try? transport.enqueue(presenceTopic, payload: Self.online, retain: true)
                    await self?.sender.resendAll()
                }
            }
        })
        tasks.append(Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                await self?.sender.resendDue()
            }
        })
    }

    /// Says offline, clears the retained presence (so the broker keeps nothing for a
    /// client that left cleanly), fails every wait, ends every stream and disconnects.
    public func close() async {
        for task in tasks { task.cancel() }
        tasks.removeAll()
        if transport.isConnected {
            try? await transport.publish(presenceTopic, payload: Self.offline, retain: true)
            try? await transport.publish(presenceTopic, payload: [], retain: true)
        }
        await transport.disconnect()
        connected = false
        for (_, waiter) in waiters { waiter.resume(throwing: CancellationError()) }
        waiters.removeAll()
        for key in rooms.keys { rooms[key]?.broadcast.finish() }
        for key in conversations.keys { conversations[key]?.broadcast.finish() }
        for key in workouts.keys { workouts[key]?.finish() }
    }

    /// How many events and commands still wait for their receipt.
    public var pendingCount: Int { get async { await sender.pendingCount } }

    /// A fresh event or command id, unique for this client.
    public func nextId() -> String { ids.next() }

    // MARK: Sending

    /// Publishes `payload` under `id` and returns its receipt, resending under the same
    /// id until one arrives. Cancelling the calling task stops the wait (the item stays
    /// pending and is still resent).
    public func send(id: String, topic: String, payload: [UInt8], label: String = "") async throws -> Receipt {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Receipt, any Error>) in
                if let previous = waiters.updateValue(continuation, forKey: id) {
                    previous.resume(throwing: CancellationError())
                }
                Task { await sender.send(Outgoing(id: id, topic: topic, payload: payload, label: label)) }
            }
        } onCancel: {
            Task { await self.cancelWait(id) }
        }
    }

    private func cancelWait(_ id: String) {
        waiters.removeValue(forKey: id)?.resume(throwing: CancellationError())
    }

    private func take(receiptMessage message: TransportMessage) async {
        guard let receipt = try? Receipt.decode(message.payload).resolved else {
            logger.warning("unreadable receipt on \(message.topic)")
            return
        }
        _ = await sender.receipt(receipt)
        if receipt.kind == .room {
            for key in rooms.keys where rooms[key]!.replica.pendingEventIds.contains(receipt.id) {
                rooms[key]!.replica.receipt(receipt)
                rooms[key]!.broadcast.send(rooms[key]!.replica)
            }
        }
        waiters.removeValue(forKey: receipt.id)?.resume(returning: receipt)
    }

    // MARK: Rooms

    /// The room as this client sees it: a new ``RoomReplica`` value after every change
    /// (the retained snapshot, each RoomChanges applied in order, a snapshot after a gap
    /// or a new epoch, this client's own edits at once and their rollback on rejection).
    /// Changes that arrive before the first snapshot are ignored; the snapshot is taken
    /// once.
    public func room(_ id: String) async throws -> AsyncStream<RoomReplica> {
        if rooms[id] == nil {
            rooms[id] = RoomWatch(replica: RoomReplica(roomId: id))
            let state = topics.roomState(room: id)
            let stream = try await transport.subscribe([state, topics.roomChanges(room: id)])
            tasks.append(Task { [weak self] in
                do {
                    for try await message in stream { await self?.take(room: id, message, isState: message.topic == state) }
                } catch {}
            })
        }
        let (key, stream) = rooms[id]!.broadcast.listen()
        _ = key
        return stream
    }

    private func take(room id: String, _ message: TransportMessage, isState: Bool) {
        guard rooms[id] != nil else { return }
        let changed: Bool
        if isState {
            guard let snapshot = try? RoomSnapshot.decode(message.payload) else { return }
            changed = rooms[id]!.replica.snapshot(snapshot)
        } else {
            guard let changes = try? RoomChanges.decode(message.payload) else { return }
            changed = rooms[id]!.replica.changes(changes)
        }
        if changed { rooms[id]!.broadcast.send(rooms[id]!.replica) }
    }

    /// The latest replica of a room watched with ``room(_:)``.
    public func replica(of room: String) -> RoomReplica? { rooms[room]?.replica }

    /// Edits a sticker: shown at once in the room's replicas (if the room is watched),
    /// sent until its receipt comes, rolled back if rejected. Returns the receipt.
    public func edit(
        _ type: EditEvent.Kind, sticker: String, in room: String, image: String? = nil, frame: Frame? = nil,
        timestamp: Millis = WallClock.now()
    ) async throws -> Receipt {
        let event = EditEvent(eventId: ids.next(), type: type, stickerId: sticker, timestamp: timestamp, image: image, frame: frame)
        return try await send(event, in: room)
    }

    /// Sends an edit event built by the app (its own eventId).
    public func send(_ event: EditEvent, in room: String) async throws -> Receipt {
        if rooms[room] != nil {
            rooms[room]!.replica.applyLocal(event, as: user)
            rooms[room]!.broadcast.send(rooms[room]!.replica)
        }
        return try await send(id: event.eventId, topic: topics.roomEvents(room: room, user: user),
                              payload: event.json().serialized(), label: "\(event.type.rawValue) \(event.stickerId)")
    }

    // MARK: Conversations

    /// This user's view of the conversation with `peer`: the retained snapshot once,
    /// then each ConversationChanges applied in order, the next snapshot after a gap or
    /// a new epoch.
    public func conversation(with peer: String) async throws -> AsyncStream<ConversationReplica> {
        if conversations[peer] == nil {
            conversations[peer] = ConversationWatch(replica: ConversationReplica(user: user, peer: peer))
            let state = topics.conversation(user: user, peer: peer)
            let stream = try await transport.subscribe([state, topics.conversationChanges(user: user, peer: peer)])
            tasks.append(Task { [weak self] in
                do {
                    for try await message in stream { await self?.take(conversation: peer, message, isState: message.topic == state) }
                } catch {}
            })
        }
        return conversations[peer]!.broadcast.listen().stream
    }

    private func take(conversation peer: String, _ message: TransportMessage, isState: Bool) {
        guard conversations[peer] != nil else { return }
        let changed: Bool
        if isState {
            guard let snapshot = try? ConversationSnapshot.decode(message.payload) else { return }
            changed = conversations[peer]!.replica.take(snapshot)
        } else {
            guard let changes = try? ConversationChanges.decode(message.payload) else { return }
            changed = conversations[peer]!.replica.apply(changes) == .applied
        }
        if changed { conversations[peer]!.broadcast.send(conversations[peer]!.replica) }
    }

    /// Sends a DM command (request, accept, decline, message, read, leave) to `peer` and
    /// returns its receipt.
    public func dm(_ type: DMCommand.Kind, to peer: String, text: String? = nil, timestamp: Millis = WallClock.now()) async throws -> Receipt {
        let command = DMCommand(commandId: ids.next(), type: type, peer: peer, timestamp: timestamp, text: text)
        return try await send(id: command.commandId, topic: topics.dmCommands(user: user),
                              payload: command.json.serialized(), label: "\(type.rawValue) \(peer)")
    }

    // MARK: Workouts

    /// The workout's retained snapshots, as they come (at most once a second while it
    /// runs, at once on every status change).
    public func workout(_ id: String) async throws -> AsyncStream<WorkoutSnapshot> {
        if workouts[id] == nil {
            workouts[id] = Broadcast()
            let stream = try await transport.subscribe([topics.workoutState(user: user, workout: id)])
            tasks.append(Task { [weak self] in
                do {
                    for try await message in stream {
                        guard let snapshot = try? WorkoutSnapshot.decode(message.payload) else { continue }
                        await self?.take(workout: id, snapshot)
                    }
                } catch {}
            })
        }
        return workouts[id]!.listen().stream
    }

    private func take(workout id: String, _ snapshot: WorkoutSnapshot) {
        if let current = workouts[id]?.current, current.epoch == snapshot.epoch, current.version >= snapshot.version { return }
        workouts[id]?.send(snapshot)
    }

    /// Starts, pauses, resumes or stops a workout from `device`; returns the receipt.
    public func control(
        _ type: WorkoutControl.Kind, workout: String, from device: Device, mode: WorkoutMode? = nil,
        timestamp: Millis = WallClock.now()
    ) async throws -> Receipt {
        let control = WorkoutControl(commandId: ids.next(), type: type, timestamp: timestamp, mode: mode)
        return try await send(id: control.commandId, topic: topics.workoutControl(user: user, workout: workout, device: device),
                              payload: control.json.serialized(), label: "\(type.rawValue) \(workout)")
    }

    /// Which role `device` plays in a workout, from its snapshot's origin: the origin
    /// publishes flight data, the other device mirrors it.
    public nonisolated func startOrigin(of device: Device, in snapshot: WorkoutSnapshot) -> StartOrigin {
        snapshot.origin == device ? .local : .remote
    }

    /// Publishes a flight sample from the origin device, throttled to one every
    /// ``flightInterval``; returns whether it went out. Telemetry gets a receipt only
    /// when rejected, so it is not resent.
    @discardableResult
    public func publishFlight(_ flight: FlightData, workout: String, from device: Device) throws -> Bool {
        let key = "\(workout)/\(device.rawValue)"
        if let last = lastFlight[key], flight.timestamp - last < flightInterval { return false }
        lastFlight[key] = flight.timestamp
        try transport.enqueue(topics.flight(user: user, workout: workout, device: device), payload: flight.json.serialized(), retain: false)
        return true
    }

    /// Publishes a health sample (the watch does, whichever device is origin).
    public func publishHealth(_ health: HealthData, workout: String) throws {
        try transport.enqueue(topics.health(user: user, workout: workout, device: .watch), payload: health.json.serialized(), retain: false)
    }

    /// The origin's flight samples, for the other device to mirror (it shows them and
    /// takes elapsedTime from them).
    public func mirroredFlights(workout: String, origin: Device) async throws -> AsyncStream<FlightData> {
        try await samples(topics.flight(user: user, workout: workout, device: origin)) { try? FlightData.decode($0).get() }
    }

    /// The watch's health samples, for the phone.
    public func healthSamples(workout: String) async throws -> AsyncStream<HealthData> {
        try await samples(topics.health(user: user, workout: workout, device: .watch)) { try? HealthData.decode($0).get() }
    }

    private func samples<T: Sendable>(_ topic: String, _ decode: @escaping @Sendable ([UInt8]) -> T?) async throws -> AsyncStream<T> {
        let source = try await transport.subscribe([topic])
        let (stream, continuation) = AsyncStream<T>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let task = Task {
            do {
                for try await message in source {
                    if let value = decode(message.payload) { continuation.yield(value) }
                }
            } catch {}
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        tasks.append(task)
        return stream
    }
}
