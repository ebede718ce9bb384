import TandemCore

/// One thing the broker (or the admin client, for an invalid id) refused.
public struct BrokerAccessFailure: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// The user the command was for.
    public var user: String
    /// The room, where the command was about one; nil for the user as a whole.
    public var room: String?
    /// The dynamic-security command (`addRoleACL`, `getClient`, ...), or `validate`.
    public var command: String
    /// The broker's own words ("Client not found", "Role not found", ...).
    public var reason: String

    public init(user: String, room: String?, command: String, reason: String) {
        self.user = user
        self.room = room
        self.command = command
        self.reason = reason
    }

    public var description: String {
        "\(user)\(room.map { " in room \($0)" } ?? ""): \(command) refused: \(reason)"
    }
}

public enum BrokerAccessError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Commands the broker refused, one entry each (a user who is not a broker client:
    /// `getClient` "Client not found"). Everything else in the same call was applied.
    case refused([BrokerAccessFailure])
    /// No answer: not started, the connection is down or dropped while waiting, or the
    /// broker did not answer in time. What was sent may or may not have been applied:
    /// reconcile once the connection is back.
    case noAnswer(String)
    /// An answer on the response topic that does not read as the plugin's.
    case unreadableAnswer(String)

    public var description: String {
        switch self {
        case .refused(let failures):
            "the broker refused \(failures.count) command(s): " + failures.prefix(5).map(\.description).joined(separator: "; ")
                + (failures.count > 5 ? "; ..." : "")
        case .noAnswer(let why): "no answer from the broker's dynamic-security plugin: \(why)"
        case .unreadableAnswer(let why): "unreadable answer from the broker's dynamic-security plugin: \(why)"
        }
    }
}

/// What a reconcile found and did.
public struct ReconcileReport: Sendable, Equatable {
    /// (user, room) pairs that became readable, and that stopped being readable.
    public var granted = 0
    public var revoked = 0
    /// Rooms a member could read whose role lacked its cursor grant (written before
    /// cursors): completed by a rewrite, which kicks nobody.
    public var completed = 0
    /// Users whose room roles were changed (they are kicked and reconnect where a room
    /// was granted, so that they receive its retained state).
    public var changedUsers: Set<String> = []
    /// Modifying commands sent (each makes the plugin rewrite its whole file).
    public var commands = 0
    /// Control messages sent, the read of the broker's state included.
    public var messages = 0
    /// Users given rooms who are not broker clients: nothing was done for them.
    public var unknownUsers: Set<String> = []
    /// Room ids that are not identifiers, and commands the broker refused. The rest
    /// was applied.
    public var failures: [BrokerAccessFailure] = []

    public init() {}
}

/// What a room role grants its user in one room, one ACL each (``RoomRoleNaming/acls(_:user:)``).
enum RoomGrant: Sendable, Hashable, CaseIterable {
    /// publishClientReceive `ROOT/rooms/ROOM/#`: the room's `state`, `changes`, the
    /// members' `events` and `cursors`.
    case read
    /// publishClientSend `ROOT/rooms/ROOM/cursors/NAME`: the user's own cursor level.
    case cursor
}

/// How room access is written into the dynamic-security plugin: per user NAME, the role
/// `tandem-rooms-NAME` (and, when its rooms do not fit one control message, the overflow
/// roles `tandem-rooms-NAME:2`, `:3`, ...: a command larger than the broker's
/// max_packet_size would disconnect the admin), each with two ACLs per room: a
/// publishClientReceive allow on `ROOT/rooms/ROOM/#` and a publishClientSend allow on
/// `ROOT/rooms/ROOM/cursors/NAME` (``RoomGrant``).
///
/// With more than one partition, each partition's rooms are in roles of their own,
/// `tandem-rooms-NAME@pK` (and `tandem-rooms-NAME@pK:2`, ...), written only by that
/// partition's leader: leaders of different partitions, in different processes, never
/// rewrite the same role, so one never undoes another's grant. (`@` is no identifier's.)
struct RoomRoleNaming: Sendable {
    let root: String
    /// The partition whose roles these are; nil with one partition.
    var partition: Int? = nil
    static let prefix = "tandem-rooms-"

    func role(_ user: String, shard: Int = 1) -> String {
        let base = Self.prefix + user + (partition.map { "@p\($0)" } ?? "")
        return shard == 1 ? base : "\(base):\(shard)"
    }

    /// The user, shard number and partition of a room role's name; nil for any other role.
    static func parse(_ rolename: String) -> (user: String, shard: Int, partition: Int?)? {
        guard rolename.hasPrefix(prefix) else { return nil }
        var rest = rolename.dropFirst(prefix.count)
        var shard = 1
        if let colon = rest.lastIndex(of: ":") {
            guard let number = Int(rest[rest.index(after: colon)...]), number >= 2 else { return nil }
            shard = number
            rest = rest[..<colon]
        }
        var partition: Int?
        if let at = rest.lastIndex(of: "@") {
            let tag = rest[rest.index(after: at)...]
            guard tag.hasPrefix("p"), let number = Int(tag.dropFirst()), number >= 0 else { return nil }
            partition = number
            rest = rest[..<at]
        }
        return Identifier.isValid(rest) ? (String(rest), shard, partition) : nil
    }

    /// Whether `rolename` is one of this naming's roles (its partition's), and whose.
    func owns(_ rolename: String) -> (user: String, shard: Int)? {
        guard let parsed = Self.parse(rolename), parsed.partition == partition else { return nil }
        return (parsed.user, parsed.shard)
    }

    /// Everything under the room (`state`, `changes`, the members' own `events` and
    /// `cursors`): one read ACL per room, not one per topic, because every modifying
    /// command makes the plugin rewrite its whole file and a control message is capped by
    /// `max_packet_size`, so a reconcile's cost grows with the ACLs' bytes (half the
    /// commands from an empty broker). Members reading each other's raw events stay
    /// within the room.
    func roomFilter(_ room: String) -> String { "\(root)/rooms/\(room)/#" }

    /// The one topic a member publishes its cursor on (CONTRACT "Room history, restore
    /// and cursors"); nobody else may, and a non-member may not at all: the broker is
    /// the only guard, since the coordinator does not read cursors.
    func cursorTopic(_ room: String, user: String) -> String { "\(root)/rooms/\(room)/cursors/\(user)" }

    /// The ACLs that make `room` `user`'s, in ``RoomGrant`` order.
    func acls(_ room: String, user: String) -> [DynsecACL] {
        [DynsecACL(type: "publishClientReceive", topic: roomFilter(room), allow: true),
         DynsecACL(type: "publishClientSend", topic: cursorTopic(room, user: user), allow: true)]
    }

    /// The room and grant of an ACL this naming writes in `user`'s roles. ACLs of earlier
    /// forms (one for `state` and one for `changes`; a cursor level of another user) are
    /// not this naming's: a reconcile rewrites them. A room with its read ACL but not its
    /// cursor ACL (a role written before cursors) is readable and incomplete: a reconcile
    /// completes it.
    func room(of acl: DynsecACL, user: String) -> (room: String, grant: RoomGrant)? {
        guard acl.allow else { return nil }
        let head = root + "/rooms/"
        guard acl.topic.hasPrefix(head) else { return nil }
        switch acl.type {
        case "publishClientReceive":
            guard acl.topic.hasSuffix("/#") else { return nil }
            let room = acl.topic.dropFirst(head.count).dropLast(2)
            return Identifier.isValid(room) ? (String(room), .read) : nil
        case "publishClientSend":
            let tail = "/cursors/" + user
            guard acl.topic.hasSuffix(tail) else { return nil }
            let room = acl.topic.dropFirst(head.count).dropLast(tail.count)
            return Identifier.isValid(room) ? (String(room), .cursor) : nil
        default:
            return nil
        }
    }

    /// What `user`'s ACLs grant, room by room.
    func grants(_ acls: [DynsecACL], user: String) -> [String: Set<RoomGrant>] {
        var grants: [String: Set<RoomGrant>] = [:]
        for acl in acls {
            if let (room, grant) = room(of: acl, user: user) { grants[room, default: []].insert(grant) }
        }
        return grants
    }
}

struct DynsecACL: Sendable, Hashable {
    var type: String
    var topic: String
    var allow: Bool

    var json: JSON { .obj(["acltype": .string(type), "topic": .string(topic), "allow": .bool(allow)]) }
    /// Bytes it takes in a command, with its separating comma.
    var size: Int { json.serialized().count + 1 }
}

/// The part of the plugin's state reconcile reads: clients and their roles, roles and
/// their ACLs (`listClients` and `listRoles`, verbose).
struct DynsecState: Sendable {
    var clientRoles: [String: [String]] = [:]
    var roleACLs: [String: [DynsecACL]] = [:]

    init(listClients: JSON, listRoles: JSON) throws(BrokerAccessError) {
        guard case .array(let clients)? = listClients["data"]?["clients"] else {
            throw .unreadableAnswer("listClients has no data.clients")
        }
        for client in clients {
            guard let name = client["username"]?.stringValue else { throw .unreadableAnswer("a client without a username") }
            clientRoles[name] = Self.roleNames(client["roles"])
        }
        guard case .array(let roles)? = listRoles["data"]?["roles"] else {
            throw .unreadableAnswer("listRoles has no data.roles")
        }
        for role in roles {
            guard let name = role["rolename"]?.stringValue else { throw .unreadableAnswer("a role without a rolename") }
            var acls: [DynsecACL] = []
            if case .array(let list)? = role["acls"] {
                for acl in list {
                    guard let type = acl["acltype"]?.stringValue, let topic = acl["topic"]?.stringValue else { continue }
                    acls.append(DynsecACL(type: type, topic: topic, allow: acl["allow"]?.boolValue ?? false))
                }
            }
            roleACLs[name] = acls
        }
    }

    static func roleNames(_ roles: JSON?) -> [String] {
        guard case .array(let list)? = roles else { return [] }
        return list.compactMap { $0["rolename"]?.stringValue }
    }

    /// Whether a client is a Tandem user (the roles scripts/gen-broker-auth and
    /// scripts/broker-user give one), as opposed to the coordinator or an admin.
    func isTandemUser(_ name: String) -> Bool {
        guard let roles = clientRoles[name] else { return false }
        return roles.contains { $0 == "tandem-client" || $0 == "tandem-user-\(name)" || RoomRoleNaming.parse($0)?.user == name }
    }
}

/// The commands that make the broker's room roles exactly `desired`: a pure function of
/// what the broker holds, so that it can be proven without one.
struct ReconcilePlan {
    /// In order: creations and rewrites first, then the attachments, deletions and, last,
    /// the one `addRoleACL` per user that gained a room without being attached a role
    /// (the plugin kicks the users of a role on `addRoleACL` and `addClientRole`, never
    /// on `modifyRole`: the kick makes the client reconnect and subscribe again, which
    /// is when mosquitto delivers retained messages).
    var commands: [JSON] = []
    /// Which user each command is for, and the room where it is about one.
    var subjects: [(user: String, room: String?)] = []
    var report = ReconcileReport()

    init(desired: [String: Set<String>], state: DynsecState, naming: RoomRoleNaming, shardBytes: Int) {
        var kicks: [(JSON, String, String?)] = []
        var late: [(JSON, String, String?)] = []
        var shardsByUser: [String: [Int: String]] = [:]
        for rolename in state.roleACLs.keys {
            if let (user, shard) = naming.owns(rolename) { shardsByUser[user, default: [:]][shard] = rolename }
        }
        let users = Set(desired.keys).union(state.clientRoles.keys.filter { state.isTandemUser($0) })
        for user in users.sorted() {
            var want = desired[user] ?? []
            for room in want where !Identifier.isValid(room) {
                report.failures.append(BrokerAccessFailure(user: user, room: room, command: "validate", reason: "not a room id (1-64 of A-Z a-z 0-9 _ . -)"))
                want.remove(room)
            }
            guard Identifier.isValid(user), let attachedRoles = state.clientRoles[user] else {
                if !want.isEmpty { report.unknownUsers.insert(user) }
                continue
            }
            let attached = Set(attachedRoles)
            let existing = shardsByUser[user] ?? [:]
            // What each existing shard holds now: every room with an ACL of this naming
            // there, in the order found; and what the attached roles grant, room by room.
            var held: [Int: [String]] = [:]
            var granted: [String: Set<RoomGrant>] = [:]
            for (shard, rolename) in existing {
                var order: [String] = []
                var seen = Set<String>()
                for acl in state.roleACLs[rolename] ?? [] {
                    guard let (room, grant) = naming.room(of: acl, user: user) else { continue }
                    if seen.insert(room).inserted { order.append(room) }
                    if attached.contains(rolename) { granted[room, default: []].insert(grant) }
                }
                held[shard] = order
            }
            let readable = Set(granted.filter { $0.value.contains(.read) }.keys)
            let whole = Set(granted.filter { $0.value.count == RoomGrant.allCases.count }.keys)
            // Keep every room where it is (fewest rewrites; a room short of an ACL is
            // completed in place), up to a shard's capacity; place the rest in the first
            // shards with room, then in new ones.
            var assigned = Set<String>()
            var placed: [Int: [String]] = [:]
            var used: [Int: Int] = [:]
            let cost: (String) -> Int = { naming.acls($0, user: user).reduce(0) { $0 + $1.size } }
            for shard in existing.keys.sorted() {
                for room in held[shard]! where want.contains(room) && !assigned.contains(room) {
                    let c = cost(room)
                    guard used[shard, default: 0] + c <= shardBytes else { break }
                    placed[shard, default: []].append(room)
                    used[shard, default: 0] += c
                    assigned.insert(room)
                }
            }
            var candidates = Set(existing.keys).union([1]).sorted()
            var next = 0
            for room in want.subtracting(assigned).sorted() {
                let c = cost(room)
                while used[candidates[next], default: 0] > 0 && used[candidates[next], default: 0] + c > shardBytes {
                    next += 1
                    if next == candidates.count { candidates.append(candidates[next - 1] + 1) }
                }
                placed[candidates[next], default: []].append(room)
                used[candidates[next], default: 0] += c
            }
            // Commands, shard by shard. A partition's first role is made and attached for
            // every Tandem user, rooms or not: attaching a role kicks the user, which
            // a grant during a step must not do (it only rewrites the role).
            let ensureFirst = naming.partition != nil
            var attaches = false
            var rewrites: [(index: Int, shard: Int)] = []
            for shard in Set(existing.keys).union(placed.keys).union(ensureFirst ? [1] : []).sorted() {
                let keep = ensureFirst && shard == 1
                let rolename = naming.role(user, shard: shard)
                let rooms = placed[shard] ?? []
                let acls = rooms.flatMap { naming.acls($0, user: user) }
                let aclsJSON = JSON.array(acls.map(\.json))
                if let current = state.roleACLs[rolename] {
                    if rooms.isEmpty && shard >= 2 {
                        late.append((.obj(["command": "deleteRole", "rolename": .string(rolename)]), user, nil))
                        continue
                    }
                    if current.count != acls.count || Set(current) != Set(acls) {
                        rewrites.append((commands.count, shard))
                        append(.obj(["command": "modifyRole", "rolename": .string(rolename), "acls": aclsJSON]), user, nil)
                    }
                    if !attached.contains(rolename) && (!rooms.isEmpty || keep) {
                        attaches = true
                        late.append((Self.attach(user, rolename), user, nil))
                    }
                } else if !rooms.isEmpty || keep {
                    append(.obj(["command": "createRole", "rolename": .string(rolename), "acls": aclsJSON]), user, nil)
                    attaches = true
                    late.append((Self.attach(user, rolename), user, nil))
                }
            }
            let wanted = want
            let gained = wanted.subtracting(readable)
            let lost = readable.subtracting(wanted)
            report.granted += gained.count
            report.revoked += lost.count
            report.completed += wanted.intersection(readable).subtracting(whole).count
            let changedCommands = rewrites.count + late.filter { $0.1 == user }.count
            if changedCommands > 0 || !gained.isEmpty || !lost.isEmpty { report.changedUsers.insert(user) }
            // A user who gained a room but is attached nothing new: hold one of its
            // ACLs back from the rewrite and add it last, which kicks the user.
            if !gained.isEmpty && !attaches {
                for (index, shard) in rewrites {
                    guard let room = placed[shard]?.first(where: { gained.contains($0) }) else { continue }
                    let rolename = naming.role(user, shard: shard)
                    let held = naming.acls(room, user: user).last!
                    let kept = (placed[shard] ?? []).flatMap { naming.acls($0, user: user) }.filter { $0 != held }
                    commands[index] = .obj(["command": "modifyRole", "rolename": .string(rolename), "acls": .array(kept.map(\.json))])
                    kicks.append((.obj([
                        "command": "addRoleACL", "rolename": .string(rolename), "acltype": .string(held.type),
                        "topic": .string(held.topic), "allow": true,
                    ]), user, room))
                    break
                }
            }
        }
        for (command, user, room) in late + kicks { append(command, user, room) }
        report.commands = commands.count
    }

    private mutating func append(_ command: JSON, _ user: String, _ room: String?) {
        commands.append(command)
        subjects.append((user, room))
    }

    static func attach(_ user: String, _ rolename: String) -> JSON {
        .obj(["command": "addClientRole", "username": .string(user), "rolename": .string(rolename), "priority": 0])
    }
}
