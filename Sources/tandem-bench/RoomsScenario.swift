import TandemCore

/// `rooms`: R rooms of S stickers; each sticker belongs to one client, which cycles
/// acquire / update / release over its stickers, so every event is accepted. A watcher
/// connection subscribes to every room's retained state, as the room's members would.
/// `contended` (see ContendedScenario.swift) uses the same machinery with every client
/// on one room and a few stickers.
final class RoomsScenario: Scenario {
    let name: String
    let options: ScenarioOptions
    let layout: Layout
    private(set) var clients: [BenchClient] = []
    private var targets: [Int32] = []
    /// Per client: the (room, sticker) pairs it cycles over, and where it is.
    private var work: [[(room: Int, sticker: Int)]] = []
    private var cursor: [Int] = []

    enum Layout {
        /// Sticker s of room r belongs to client (r * S + s) % C.
        case owned
        /// Every client on room 0, cycling over all its stickers from its own offset.
        case contended
    }

    init(name: String, options: ScenarioOptions, layout: Layout) {
        self.name = name
        self.options = options
        self.layout = layout
    }

    var roomCount: Int { layout == .contended ? 1 : options.rooms }
    /// Each sticker has one client that acquires, updates and releases it: nothing is
    /// refused unless the setup was incomplete or the coordinator misjudged.
    var everyEventAccepted: Bool { layout == .owned }
    var shape: [String: Int] { ["clients": options.clients, "rooms": roomCount, "stickersPerRoom": options.stickers] }

    func roomId(_ r: Int) -> String { layout == .contended ? "bench-contended" : "bench-room-\(r)" }
    func user(_ c: Int) -> String { options.broker.user(c, otherwise: "b\(c)") }

    func connect(tracker: Tracker) async throws {
        let topics = options.topics
        targets = (0..<roomCount).map { tracker.target(topics.roomState(room: roomId($0))) }
        work = Array(repeating: [], count: options.clients)
        cursor = Array(repeating: 0, count: options.clients)
        for r in 0..<roomCount {
            for s in 0..<options.stickers {
                switch layout {
                case .owned: work[(r * options.stickers + s) % options.clients].append((r, s))
                case .contended: for c in 0..<options.clients { work[c].append((r, s)) }
                }
            }
        }
        if layout == .contended {
            for c in 0..<options.clients { cursor[c] = 3 * (c % max(1, options.stickers)) }
        }
        let handler = receiptHandler(tracker)
        let options = self.options
        var list = try await BenchClient.connectAll(options.clients) { c in
            try await BenchClient(broker: options.broker, as: c, clientId: "bench-\(options.nonce)-\(c)", filters: [topics.receipts(user: options.broker.user(c, otherwise: "b\(c)"))], onMessage: handler)
        }
        let watcher = try await BenchClient(broker: options.broker, clientId: "bench-\(options.nonce)-watcher",
                                            filters: (0..<roomCount).map { topics.roomState(room: roomId($0)) }, onMessage: handler)
        list.append(watcher)
        clients = list
    }

    func event(client c: Int, room r: Int, sticker s: Int, type: EditEvent.Kind, id: String) -> Outgoing {
        let image: String? = switch type {
        case .create: filler(max(options.messageBytes, 40), limit: 256)
        case .update: options.messageBytes > 0 ? filler(options.messageBytes, limit: 256) : nil
        default: nil
        }
        let frame: Frame? = (type == .create || type == .update) ? Frame(x: Double(id.utf8.count * 7 % 700), y: 12.5, width: 120, height: 80) : nil
        let e = EditEvent(eventId: id, type: type, stickerId: "s\(s)", timestamp: wallMillis(), image: image, frame: frame)
        return Outgoing(client: c, topic: options.topics.roomEvents(room: roomId(r), user: user(c)), payload: e.json().serialized(), id: id, target: targets[r])
    }

    /// Makes each room by inviting every client with stickers in it (rooms belong to
    /// their members: the first such client owns it; `already_member` from an earlier
    /// run is fine), then creates every sticker (by its owner; `already_exists` from an
    /// earlier run is fine), then a release, so that every lock is free when the load
    /// starts. (scripts/bench runs the coordinator with --max-room-members high enough.)
    func setup() -> [[Outgoing]] {
        var invites: [Outgoing] = []
        for r in 0..<roomCount {
            var members: [Int] = []
            for s in 0..<options.stickers {
                let c = layout == .owned ? (r * options.stickers + s) % options.clients : s % options.clients
                if !members.contains(c) { members.append(c) }
            }
            if layout == .contended { members = Array(0..<options.clients) }
            guard let owner = members.first else { continue }
            for member in members.dropFirst() {
                let id = "\(options.nonce)-i\(r).\(member)"
                let invite = EditEvent(eventId: id, type: .invite, member: user(member), timestamp: wallMillis())
                invites.append(Outgoing(client: owner, topic: options.topics.roomEvents(room: roomId(r), user: user(owner)),
                                        payload: invite.json().serialized(), id: id, target: targets[r]))
            }
        }
        var creates: [Outgoing] = []
        var releases: [Outgoing] = []
        for r in 0..<roomCount {
            for s in 0..<options.stickers {
                let c = layout == .owned ? (r * options.stickers + s) % options.clients : s % options.clients
                creates.append(event(client: c, room: r, sticker: s, type: .create, id: "\(options.nonce)-c\(r).\(s)"))
                releases.append(event(client: c, room: r, sticker: s, type: .release, id: "\(options.nonce)-x\(r).\(s)"))
            }
        }
        return [invites, creates, releases]
    }

    private static let cycle: [EditEvent.Kind] = [.acquire, .update, .release]

    func next(_ seq: Int) -> Outgoing {
        var c = seq % options.clients
        while work[c].isEmpty { c = (c + 1) % options.clients }
        let j = cursor[c]
        cursor[c] += 1
        let (r, s) = work[c][(j / 3) % work[c].count]
        return event(client: c, room: r, sticker: s, type: Self.cycle[j % 3], id: "\(options.nonce)-\(c)-\(j)")
    }

    /// Releases whatever a cut-off cycle still holds.
    func teardown() -> [Outgoing] {
        var out: [Outgoing] = []
        for c in 0..<options.clients where !work[c].isEmpty && cursor[c] % 3 != 0 {
            let j = cursor[c]
            let (r, s) = work[c][(j / 3) % work[c].count]
            out.append(event(client: c, room: r, sticker: s, type: .release, id: "\(options.nonce)-\(c)-t\(j)"))
        }
        return out
    }
}
