@testable import TandemCoordinator
import TandemCore
import Testing

/// The room roles' ACLs and ``ReconcilePlan`` as pure functions of what the broker
/// holds: which ACLs make a room a member's, how many rooms a role takes before it
/// overflows, and how a role written before cursors is brought up to date. (What the
/// broker makes of those ACLs: BrokerAccessAdminTests, RoomCursorTests.)
@Suite struct RoomRolePlanTests {
    let naming = RoomRoleNaming(root: "tandem/v1")

    @Test func aRoomGrantsReadingItAndPublishingOnTheMembersOwnCursorLevel() {
        #expect(naming.acls("r1", user: "alice") == [
            DynsecACL(type: "publishClientReceive", topic: "tandem/v1/rooms/r1/#", allow: true),
            DynsecACL(type: "publishClientSend", topic: "tandem/v1/rooms/r1/cursors/alice", allow: true),
        ])
        // A partition's roles grant the same topics.
        #expect(RoomRoleNaming(root: "tandem/v1", partition: 3).acls("r1", user: "alice") == naming.acls("r1", user: "alice"))
        #expect(RoomRoleNaming(root: "acme/v2").acls("r1", user: "bob").map(\.topic) == ["acme/v2/rooms/r1/#", "acme/v2/rooms/r1/cursors/bob"])

        for acl in naming.acls("r1", user: "alice") {
            #expect(naming.room(of: acl, user: "alice")?.room == "r1")
        }
        #expect(naming.grants(naming.acls("r1", user: "alice") + naming.acls("r2", user: "alice").prefix(1), user: "alice")
            == ["r1": [.read, .cursor], "r2": [.read]])
    }

    /// ACLs a reconcile does not count as a grant, and so takes out of the role.
    @Test(arguments: [
        DynsecACL(type: "publishClientSend", topic: "tandem/v1/rooms/r1/cursors/bob", allow: true),  // someone else's level
        DynsecACL(type: "publishClientSend", topic: "tandem/v1/rooms/r1/cursors/+", allow: true),
        DynsecACL(type: "publishClientSend", topic: "tandem/v1/rooms/r1/cursors/alice", allow: false),
        DynsecACL(type: "publishClientSend", topic: "tandem/v1/rooms/r1/#", allow: true),
        DynsecACL(type: "publishClientSend", topic: "tandem/v1/rooms/a/cursors/x/cursors/alice", allow: true),
        DynsecACL(type: "publishClientReceive", topic: "tandem/v1/rooms/r1/cursors/alice", allow: true),
        DynsecACL(type: "publishClientReceive", topic: "tandem/v1/rooms/r1/state", allow: true),  // the first version's
        DynsecACL(type: "publishClientReceive", topic: "other/v1/rooms/r1/#", allow: true),
        DynsecACL(type: "subscribePattern", topic: "tandem/v1/rooms/r1/#", allow: true),
    ])
    func aclsThatAreNoGrant(acl: DynsecACL) {
        #expect(naming.room(of: acl, user: "alice") == nil)
    }

    /// From an empty broker: every room in exactly one role with both ACLs, each role's
    /// ACLs within `shardBytes` (a command beyond the broker's max_packet_size would
    /// disconnect the admin), as few roles as fit. Two ACLs a room take about twice the
    /// bytes of the one before cursors, so a role takes about half the rooms.
    @Test func roomsFillRolesByTheBytesOfBothACLs() throws {
        let rooms = Set((0..<60).map { "room-\($0)" })
        let empty = try state(["alice": ["tandem-rooms-alice"]], ["tandem-rooms-alice": []])
        let plan = ReconcilePlan(desired: ["alice": rooms], state: empty, naming: naming, shardBytes: 2_000)
        let after = applying(plan.commands, to: empty)
        let roles = after.roleACLs.filter { $0.key.hasPrefix("tandem-rooms-alice") }
        for (role, acls) in roles {
            #expect(acls.reduce(0) { $0 + $1.size } <= 2_000, "\(role)")
        }
        #expect(naming.acls("room-10", user: "alice").reduce(0) { $0 + $1.size } == 177)
        // 11 rooms of 177 bytes a role (room-0 ... room-9 are a byte shorter each ACL):
        // 6 roles, where one ACL a room (86 bytes) took 3.
        #expect(roles.keys.sorted() == ["tandem-rooms-alice"] + (2...6).map { "tandem-rooms-alice:\($0)" })
        #expect(Set(after.clientRoles["alice"] ?? []) == Set(roles.keys))
        var grants: [String: Set<RoomGrant>] = [:]
        for acls in roles.values {
            grants.merge(naming.grants(acls, user: "alice")) { _, _ in Issue.record("a room in two roles"); return [] }
        }
        #expect(grants == whole(rooms))
        #expect(plan.report.granted == 60 && plan.report.completed == 0)
        #expect(ReconcilePlan(desired: ["alice": rooms], state: after, naming: naming, shardBytes: 2_000).commands.isEmpty)
    }

    /// The longest names at the shipped message size (60,000 bytes, roles of 59,000):
    /// every command, with its correlation data, leaves room in its control message, and
    /// a role holds 168 rooms (418 before cursors).
    @Test func theLongestNamesStillFitTheShippedMessageSize() throws {
        let user = String(repeating: "u", count: 64)
        let rooms = Set((0..<500).map { String(repeating: "r", count: 60) + "\($0 + 1000)" })
        let naming = RoomRoleNaming(root: "tandem/v1", partition: 999)
        let empty = try state([user: ["tandem-client"]], [:])
        let plan = ReconcilePlan(desired: [user: rooms], state: empty, naming: naming, shardBytes: 59_000)
        for command in plan.commands {
            var tagged = command
            if case .object(var members) = command {
                members.append(JSON.Member("correlationData", .string("\(UInt64.max)-\(UInt64.max).\(Int.max)")))
                tagged = .object(members)
            }
            #expect(JSON.obj(["commands": .array([tagged])]).serialized().count <= 60_000 - 72)
        }
        let roles = applying(plan.commands, to: empty).roleACLs
        #expect(roles.count == 3)
        #expect(roles.values.map { $0.count / 2 }.sorted() == [164, 168, 168])
    }

    /// A role written before cursors holds each room's read ACL alone: the member reads
    /// the room but may not publish its cursor there. A reconcile completes every such
    /// room where it is, with modifyRole alone (no kick: nothing new to read), and
    /// counts it as completed, not granted; the next reconcile sends nothing.
    @Test func aRoleWrittenBeforeCursorsIsCompletedInPlaceWithoutAKick() throws {
        let old = try state(
            ["alice": ["tandem-client", "tandem-rooms-alice"], "bob": ["tandem-client", "tandem-rooms-bob"], "carol": ["tandem-client", "tandem-rooms-carol"]],
            ["tandem-rooms-alice": readOnly(["r1", "r2"]), "tandem-rooms-bob": readOnly(["r1"]) + naming.acls("r3", user: "bob"),
             "tandem-rooms-carol": []])
        let desired: [String: Set<String>] = ["alice": ["r1", "r2"], "bob": ["r1", "r3"]]
        let plan = ReconcilePlan(desired: desired, state: old, naming: naming, shardBytes: 59_000)
        #expect(plan.commands.compactMap { $0["command"]?.stringValue } == ["modifyRole", "modifyRole"])
        #expect(plan.report.completed == 3 && plan.report.granted == 0 && plan.report.revoked == 0, "\(plan.report)")
        #expect(plan.report.changedUsers == ["alice", "bob"])
        let after = applying(plan.commands, to: old)
        #expect(naming.grants(after.roleACLs["tandem-rooms-alice"]!, user: "alice") == whole(["r1", "r2"]))
        #expect(naming.grants(after.roleACLs["tandem-rooms-bob"]!, user: "bob") == whole(["r1", "r3"]))
        #expect(ReconcilePlan(desired: desired, state: after, naming: naming, shardBytes: 59_000).commands.isEmpty)

        // Completed and changed at once (alice's r2, bob's r1): a room gained besides is
        // what kicks the member (its last ACL added by addRoleACL, after the rewrite), a
        // room lost is taken out.
        let more = ReconcilePlan(desired: ["alice": ["r2", "r9"], "bob": ["r1", "r3"]], state: old, naming: naming, shardBytes: 59_000)
        #expect(more.report.completed == 2 && more.report.granted == 1 && more.report.revoked == 1, "\(more.report)")
        #expect(more.commands.last?["command"] == "addRoleACL" && more.commands.last?["topic"] == "tandem/v1/rooms/r9/cursors/alice")
        let moved = applying(more.commands, to: old)
        #expect(naming.grants(moved.roleACLs["tandem-rooms-alice"]!, user: "alice") == whole(["r2", "r9"]))
    }

    /// A full role of the earlier form holds more rooms than fit once each has two ACLs:
    /// the rooms it keeps are completed in place, the rest move to a new overflow role.
    @Test func aFullRoleOfTheEarlierFormOverflowsWhenCompleted() throws {
        let rooms = (0..<40).map { "room-\($0 + 10)" }
        let old = try state(["alice": ["tandem-client", "tandem-rooms-alice"]], ["tandem-rooms-alice": readOnly(rooms)])
        #expect(readOnly(rooms).reduce(0) { $0 + $1.size } <= 3_500)
        let plan = ReconcilePlan(desired: ["alice": Set(rooms)], state: old, naming: naming, shardBytes: 3_500)
        #expect(plan.report.completed == 40 && plan.report.granted == 0, "\(plan.report)")
        let after = applying(plan.commands, to: old)
        let roles = after.roleACLs.filter { $0.key.hasPrefix("tandem-rooms-alice") }
        #expect(roles.keys.sorted() == ["tandem-rooms-alice", "tandem-rooms-alice:2", "tandem-rooms-alice:3"])
        // The first role keeps the rooms it had first, whole.
        #expect(roles["tandem-rooms-alice"]!.map(\.topic).prefix(4) == [
            "tandem/v1/rooms/room-10/#", "tandem/v1/rooms/room-10/cursors/alice",
            "tandem/v1/rooms/room-11/#", "tandem/v1/rooms/room-11/cursors/alice",
        ])
        var grants: [String: Set<RoomGrant>] = [:]
        for (role, acls) in roles {
            #expect(acls.reduce(0) { $0 + $1.size } <= 3_500, "\(role)")
            grants.merge(naming.grants(acls, user: "alice")) { _, _ in Issue.record("a room in two roles"); return [] }
        }
        #expect(grants == whole(Set(rooms)))
        #expect(Set(after.clientRoles["alice"]!) == Set(roles.keys).union(["tandem-client"]))
        #expect(ReconcilePlan(desired: ["alice": Set(rooms)], state: after, naming: naming, shardBytes: 3_500).commands.isEmpty)
    }

    /// A cursor level that is not the member's own (an ACL written by hand) is taken out.
    @Test func anotherUsersCursorLevelIsTakenOut() throws {
        let old = try state(["alice": ["tandem-client", "tandem-rooms-alice"]],
                            ["tandem-rooms-alice": naming.acls("r1", user: "alice") + naming.acls("r1", user: "bob").suffix(1)])
        let plan = ReconcilePlan(desired: ["alice": ["r1"]], state: old, naming: naming, shardBytes: 59_000)
        #expect(plan.commands.count == 1 && plan.report.granted == 0 && plan.report.completed == 0, "\(plan.report)")
        #expect(applying(plan.commands, to: old).roleACLs["tandem-rooms-alice"] == naming.acls("r1", user: "alice"))
    }

    // MARK: - Helpers

    private func whole(_ rooms: Set<String>) -> [String: Set<RoomGrant>] {
        Dictionary(uniqueKeysWithValues: rooms.map { ($0, Set(RoomGrant.allCases)) })
    }

    /// The rooms as a version before cursors wrote them: the read ACL alone.
    private func readOnly(_ rooms: [String]) -> [DynsecACL] {
        rooms.map { DynsecACL(type: "publishClientReceive", topic: naming.roomFilter($0), allow: true) }
    }

    private func state(_ clients: [String: [String]], _ roles: [String: [DynsecACL]]) throws -> DynsecState {
        let clientList = clients.sorted { $0.key < $1.key }.map { name, roles in
            JSON.obj(["username": .string(name), "roles": .array(roles.map { JSON.obj(["rolename": .string($0)]) })])
        }
        let roleList = roles.sorted { $0.key < $1.key }.map { name, acls in
            JSON.obj(["rolename": .string(name), "acls": .array(acls.map(\.json))])
        }
        return try DynsecState(listClients: .obj(["data": .obj(["clients": .array(clientList)])]),
                               listRoles: .obj(["data": .obj(["roles": .array(roleList)])]))
    }

    /// What the plugin makes of the commands a plan sends (the ones it sends, and only
    /// as far as the plan reads the result back), for checking that a plan converges.
    private func applying(_ commands: [JSON], to state: DynsecState) -> DynsecState {
        var state = state
        func acls(_ list: JSON?) -> [DynsecACL] {
            guard case .array(let items)? = list else { return [] }
            return items.map { DynsecACL(type: $0["acltype"]!.stringValue!, topic: $0["topic"]!.stringValue!, allow: $0["allow"]!.boolValue!) }
        }
        for command in commands {
            let role = command["rolename"]?.stringValue ?? ""
            switch command["command"]?.stringValue {
            case "createRole":
                #expect(state.roleACLs[role] == nil, "\(role) exists")
                state.roleACLs[role] = acls(command["acls"])
            case "modifyRole":
                #expect(state.roleACLs[role] != nil, "\(role) is missing")
                state.roleACLs[role] = acls(command["acls"])
            case "deleteRole":
                state.roleACLs[role] = nil
                for client in state.clientRoles.keys { state.clientRoles[client]?.removeAll { $0 == role } }
            case "addClientRole":
                let user = command["username"]!.stringValue!
                if !(state.clientRoles[user] ?? []).contains(role) { state.clientRoles[user, default: []].append(role) }
            case "addRoleACL":
                let acl = DynsecACL(type: command["acltype"]!.stringValue!, topic: command["topic"]!.stringValue!, allow: command["allow"]!.boolValue!)
                #expect(state.roleACLs[role]?.contains(acl) == false, "\(acl) in \(role) already")
                state.roleACLs[role, default: []].append(acl)
            default:
                Issue.record("a command this model does not know: \(command)")
            }
        }
        return state
    }
}
