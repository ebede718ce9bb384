/// The topic tree of the wire contract, under a configurable root (default `tandem/v1`).
public struct Topics: Sendable, Equatable {
    public static let defaultRoot = "tandem/v1"

    public let root: String

    public init(root: String = Topics.defaultRoot) {
        self.root = root
    }

    // MARK: Published by clients

    public func roomEvents(room: String, user: String) -> String { "\(root)/rooms/\(room)/events/\(user)" }
    /// A member's pointer over the room's photo (QoS 0, not retained; CONTRACT "Room
    /// history, restore and cursors"): `{"x","y"}`, or `{}` when it leaves.
    public func roomCursor(room: String, user: String) -> String { "\(root)/rooms/\(room)/cursors/\(user)" }
    /// Every member's cursor in `room` (the last level is the member's userId).
    public func roomCursors(room: String) -> String { "\(root)/rooms/\(room)/cursors/+" }
    public func dmCommands(user: String) -> String { "\(root)/users/\(user)/dm/commands" }
    public func workoutControl(user: String, workout: String, device: Device) -> String {
        "\(root)/users/\(user)/workouts/\(workout)/control/\(device.rawValue)"
    }
    public func flight(user: String, workout: String, device: Device) -> String {
        "\(root)/users/\(user)/workouts/\(workout)/flight/\(device.rawValue)"
    }
    public func health(user: String, workout: String, device: Device) -> String {
        "\(root)/users/\(user)/workouts/\(workout)/health/\(device.rawValue)"
    }
    public func presence(user: String, clientId: String) -> String { "\(root)/presence/\(user)/\(clientId)" }
    /// Every client's presence (readable by every user).
    public var allPresence: String { "\(root)/presence/+/+" }
    /// Request/response queries (DM history, logbook) that are not state changes.
    public func requests(user: String) -> String { "\(root)/users/\(user)/requests" }

    // MARK: Published by the coordinator

    public func roomState(room: String) -> String { "\(root)/rooms/\(room)/state" }
    public func roomChanges(room: String) -> String { "\(root)/rooms/\(room)/changes" }
    /// A member's own entry for a room it belongs to (retained; cleared when it leaves).
    public func userRoom(user: String, room: String) -> String { "\(root)/users/\(user)/rooms/\(room)" }
    public func conversation(user: String, peer: String) -> String { "\(root)/users/\(user)/dm/conversations/\(peer)" }
    public func conversations(user: String) -> String { "\(root)/users/\(user)/dm/conversations/+" }
    public func conversationChanges(user: String, peer: String) -> String { "\(root)/users/\(user)/dm/conversations/\(peer)/changes" }
    /// Every ConversationChanges of `user`'s views.
    public func allConversationChanges(user: String) -> String { "\(root)/users/\(user)/dm/conversations/+/changes" }
    public func workoutState(user: String, workout: String) -> String { "\(root)/users/\(user)/workouts/\(workout)/state" }
    /// Every workout's snapshot of `user` (a page that lists them all).
    public func allWorkoutStates(user: String) -> String { "\(root)/users/\(user)/workouts/+/state" }
    public func receipts(user: String) -> String { "\(root)/users/\(user)/receipts" }
    public func responses(user: String) -> String { "\(root)/users/\(user)/responses" }
    public var coordinatorStatus: String { "\(root)/coordinator/status" }
    public var coordinatorMetrics: String { "\(root)/coordinator/metrics" }
    /// Each coordinator process's own retained status (leader or standby).
    public func coordinatorInstance(_ instanceId: String) -> String { "\(root)/coordinator/instances/\(instanceId)" }

    // MARK: What the coordinator subscribes to

    public var inboundFilters: [String] {
        [
            "\(root)/rooms/+/events/+",
            "\(root)/users/+/dm/commands",
            "\(root)/users/+/workouts/+/control/+",
            "\(root)/users/+/workouts/+/flight/+",
            "\(root)/users/+/workouts/+/health/+",
            "\(root)/users/+/requests",
            "\(root)/presence/+/+",
        ]
    }

    // MARK: Parsing inbound topics

    /// Where an inbound message goes, decided by its topic alone.
    public enum Inbound: Sendable, Equatable {
        case roomEvent(room: String, user: String)
        case dmCommand(user: String)
        case workoutControl(user: String, workout: String, device: Device)
        case flight(user: String, workout: String, device: Device)
        case health(user: String, workout: String, device: Device)
        case request(user: String)
        case presence(user: String, clientId: String)
        /// The sender is known but another topic level is invalid: answer `invalid_payload`,
        /// under the id read as `idSource` says, with the current version of `workout`
        /// when the topic named a valid one.
        case invalid(user: String, kind: Receipt.Kind, reason: String, idSource: ReceiptIdSource, workout: String? = nil)
    }

    /// A topic's levels, split at each "/" over its UTF-8 bytes (what `split(separator:)`
    /// on a `Substring` does a `Character` at a time), empty ones kept.
    static func levels(_ bytes: Substring.UTF8View) -> [Substring] {
        var levels: [Substring] = []
        levels.reserveCapacity(6)
        var start = bytes.startIndex
        var index = start
        while index != bytes.endIndex {
            if bytes[index] == UInt8(ascii: "/") {
                levels.append(Substring(bytes[start..<index]))
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        levels.append(Substring(bytes[start..<bytes.endIndex]))
        return levels
    }

    /// Parses a topic the coordinator received. Returns nil for a topic that is not
    /// Tandem's inbound or whose `{userId}` level is invalid (such a message is dropped).
    public func parseInbound(_ topic: String) -> Inbound? {
        guard topic.hasPrefix(root), topic.utf8.count > root.utf8.count + 1 else { return nil }
        let rest = topic.utf8.dropFirst(root.utf8.count)
        guard rest.first == UInt8(ascii: "/") else { return nil }
        let levels = Self.levels(rest.dropFirst())
        switch (levels.count, levels.first) {
        case (4, "rooms") where levels[2] == "events":
            let user = levels[3]
            guard Identifier.isValid(user) else { return nil }
            guard Identifier.isValid(levels[1]) else {
                return .invalid(user: String(user), kind: .room, reason: "invalid roomId in topic", idSource: .field("eventId"))
            }
            return .roomEvent(room: String(levels[1]), user: String(user))
        case (3, "presence"):
            guard Identifier.isValid(levels[1]), !levels[2].isEmpty else { return nil }
            return .presence(user: String(levels[1]), clientId: String(levels[2]))
        case (_, "users"):
            guard levels.count >= 3, Identifier.isValid(levels[1]) else { return nil }
            let user = String(levels[1])
            if levels.count == 4, levels[2] == "dm", levels[3] == "commands" {
                return .dmCommand(user: user)
            }
            if levels.count == 3, levels[2] == "requests" {
                return .request(user: user)
            }
            if levels.count == 6, levels[2] == "workouts" {
                let kind = levels[4]
                guard kind == "control" || kind == "flight" || kind == "health" else { return nil }
                let idSource: ReceiptIdSource = switch kind {
                case "flight": .timestamp(prefix: "flight")
                case "health": .timestamp(prefix: "health")
                default: .field("commandId")
                }
                guard Identifier.isValid(levels[3]) else {
                    return .invalid(user: user, kind: .workout, reason: "invalid workoutId in topic", idSource: idSource)
                }
                guard let device = Device(rawValue: String(levels[5])) else {
                    return .invalid(user: user, kind: .workout, reason: "device must be phone or watch", idSource: idSource, workout: String(levels[3]))
                }
                let workout = String(levels[3])
                switch kind {
                case "control": return .workoutControl(user: user, workout: workout, device: device)
                case "flight": return .flight(user: user, workout: workout, device: device)
                default: return .health(user: user, workout: workout, device: device)
                }
            }
            return nil
        default:
            return nil
        }
    }
}

/// The two devices of a mirrored workout.
public enum Device: String, Codable, Sendable, CaseIterable {
    case phone, watch

    public var other: Device { self == .phone ? .watch : .phone }
}
