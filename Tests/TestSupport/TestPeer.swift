import Foundation
import TandemCore
import TandemMQTT

/// A user as the integration tests play one: a real MQTT client that publishes events
/// and commands and records everything it hears (its receipts, its DM and workout
/// states, every room's state and changes, the coordinator's status).
public final class TestPeer: Sendable {
    public let user: String
    public let client: MQTTClient
    public let topics = Topics()
    let heard = LockedBox<[MQTTMessage]>([])
    let reader: LockedBox<Task<Void, Never>?> = LockedBox(nil)

    /// Connects as `user`. On the shipped broker the password is the demo one
    /// (`<user>-demo`) unless given; `asCoordinatorWatcher` connects as alice but only
    /// listens (any user may read the coordinator's topics).
    public static func connect(
        broker: MosquittoBroker, user: String, password: String? = nil, asCoordinatorWatcher: Bool = false,
        will: MQTTWill? = nil, extraFilters: [String] = []
    ) async throws -> TestPeer {
        var username: String?
        var secret: String?
        if broker.configuration.authenticates {
            username = asCoordinatorWatcher ? "alice" : user
            secret = password ?? "\(username!)-demo"
        }
        let client = try MQTTClient(configuration: MQTTConfiguration(
            host: broker.host, port: asCoordinatorWatcher ? broker.observerPort : broker.port, clientId: "peer-\(user)-\(UInt32.random(in: 0...UInt32.max))",
            username: username, password: secret, will: will, reconnectDelay: 0.1, reconnectDelayMax: 0.5))
        let peer = TestPeer(user: user, client: client)
        let t = peer.topics
        var filters = [t.coordinatorStatus, t.coordinatorMetrics, "\(t.root)/rooms/+/state", "\(t.root)/rooms/+/changes"] + extraFilters
        if !asCoordinatorWatcher { filters.append("\(t.root)/users/\(user)/#") }
        let subscription = try await client.subscribe(filters)
        peer.reader.set(Task { [heard = peer.heard] in
            do {
                for try await message in subscription {
                    heard.update { $0.append(message) }
                }
            } catch {}
        })
        try await client.connect()
        return peer
    }

    init(user: String, client: MQTTClient) {
        self.user = user
        self.client = client
    }

    public func close() async {
        reader.get()?.cancel()
        await client.disconnect()
    }

    // MARK: Sending

    public func publish(_ topic: String, _ payload: JSON, retain: Bool = false) async throws {
        try await client.publish(topic, payload: payload.serialized(), qos: .atLeastOnce, retain: retain)
    }

    public func publishRaw(_ topic: String, _ payload: [UInt8]) async throws {
        try await client.publish(topic, payload: payload, qos: .atLeastOnce)
    }

    /// Publishes a room edit event as this user.
    public func edit(room: String, _ event: JSON) async throws {
        try await publish(topics.roomEvents(room: room, user: user), event)
    }

    /// Invites `members` into `room` (making it, with this user as its owner, if it does
    /// not exist yet) and waits for each receipt: every one must be accepted.
    public func invite(room: String, _ members: [String], role: String? = nil, at timestamp: Int64 = nowMillis()) async throws {
        for member in members {
            let id = "invite-\(room)-\(member)-\(UInt32.random(in: 0...UInt32.max))"
            try await edit(room: room, .membership(id, "invite", member: member, role: role, at: timestamp))
            let receipt = try await self.receipt(id)
            guard receipt["status"] == "accepted" else { throw TestPeerError.refused("invite of \(member) into \(room): \(receipt.text)") }
        }
    }

    public func dm(_ command: JSON) async throws {
        try await publish(topics.dmCommands(user: user), command)
    }

    // MARK: Hearing

    /// Every message heard on `topic`, parsed, in order.
    public func all(on topic: String) -> [JSON] {
        heard.get().filter { $0.topic == topic }.compactMap { try? JSON.parse($0.payload) }
    }

    public func latest(on topic: String) -> JSON? { all(on: topic).last }

    /// How many messages this peer has heard so far (a cursor for ``heard(from:)``).
    public var heardCount: Int { heard.get().count }

    /// The messages heard from position `index` on, raw, in order: for tests that follow
    /// a long stream incrementally instead of re-reading everything.
    public func heard(from index: Int) -> [MQTTMessage] {
        heard.update { all in index < all.count ? Array(all[index...]) : [] }
    }

    public var receipts: [JSON] { all(on: topics.receipts(user: user)) }

    public func receipts(id: String) -> [JSON] { receipts.filter { $0["id"]?.stringValue == id } }

    /// Waits until a message on `topic` satisfies `predicate`; returns it.
    @discardableResult
    public func waitFor(_ topic: String, timeout: Duration = .seconds(10), where predicate: (JSON) -> Bool = { _ in true }) async throws -> JSON {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let hit = all(on: topic).last(where: predicate) { return hit }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw PeerError.timedOut("\(user) heard nothing matching on \(topic) within \(timeout); last: \(latest(on: topic)?.text ?? "nothing")")
    }

    /// Waits for the receipt with `id` (the first one, or the `count`-th).
    @discardableResult
    public func receipt(_ id: String, count: Int = 1, timeout: Duration = .seconds(10)) async throws -> JSON {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let matching = receipts(id: id)
            if matching.count >= count { return matching[count - 1] }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw PeerError.timedOut("\(user) got no receipt \(count) for \(id) within \(timeout); \(receipts.count) receipts so far, the last: \(receipts.suffix(5).map(\.text))")
    }

    /// Sends with `send` until the receipt for `id` comes, again every `every`, as an
    /// agent does (a message can be lost, unanswered, in a partition's hand-over between
    /// processes: the contract's answer is the resend, which the coordinator
    /// deduplicates by id); returns the first receipt.
    @discardableResult
    public func untilReceipt(_ id: String, timeout: Duration = .seconds(20), every: Duration = .seconds(2),
                             _ send: () async throws -> Void) async throws -> JSON {
        let deadline = ContinuousClock.now + timeout
        while true {
            try await send()
            let wait = min(every, deadline - ContinuousClock.now)
            if wait > .zero, let answer = try? await receipt(id, timeout: wait) { return answer }
            if ContinuousClock.now >= deadline { return try await receipt(id, timeout: .zero) }
        }
    }

    /// Waits until the retained room state reaches `version` (or later).
    @discardableResult
    public func roomState(_ room: String, version: Int64, timeout: Duration = .seconds(10)) async throws -> JSON {
        try await waitFor(topics.roomState(room: room), timeout: timeout) { ($0["version"]?.int64Value ?? 0) >= version }
    }

    public enum PeerError: Error, CustomStringConvertible {
        case timedOut(String)
        public var description: String {
            switch self {
            case .timedOut(let message): message
            }
        }
    }
}

/// Milliseconds since the Unix epoch, as the wire writes times.
public func nowMillis() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

public enum TestPeerError: Error, CustomStringConvertible {
    case refused(String)
    public var description: String {
        switch self {
        case .refused(let what): "refused: \(what)"
        }
    }
}

extension JSON {
    /// A membership event payload (invite, remove, role, leave).
    public static func membership(_ id: String, _ type: String, member: String? = nil, role: String? = nil, at timestamp: Int64 = nowMillis()) -> JSON {
        var members: [JSON.Member] = [.init("eventId", .string(id)), .init("type", .string(type)), .init("timestamp", .int(timestamp))]
        if let member { members.append(.init("member", .string(member))) }
        if let role { members.append(.init("role", .string(role))) }
        return .object(members)
    }

    /// A room edit event payload.
    public static func edit(_ id: String, _ type: String, sticker: String, at timestamp: Int64 = nowMillis(), image: String? = nil, frame: (Double, Double, Double, Double)? = nil) -> JSON {
        var members: [JSON.Member] = [
            .init("eventId", .string(id)), .init("type", .string(type)), .init("stickerId", .string(sticker)),
            .init("timestamp", .int(timestamp)),
        ]
        if let image { members.append(.init("image", .string(image))) }
        if let frame {
            members.append(.init("frame", .obj(["x": .double(frame.0), "y": .double(frame.1), "width": .double(frame.2), "height": .double(frame.3)])))
        }
        return .object(members)
    }
}
