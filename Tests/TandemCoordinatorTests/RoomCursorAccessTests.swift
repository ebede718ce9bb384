import Foundation
@testable import TandemCoordinator
import TandemCore
import Testing
import TestSupport

/// Cursors (`rooms/R/cursors/U`, QoS 0) against a real mosquitto with the shipped
/// dynamic-security configuration and the admin's room roles: the coordinator never
/// reads them, so the broker alone keeps them within the room and each member on its own
/// level. Every check is on live connections, as apps hold them.
@Suite struct RoomCursorAccessTests {
    @Test func membersPublishOnTheirOwnLevelAndOnlyMembersReceive() async throws {
        try await withBroker(.shipped) { broker in
            let admin = try await startedAdmin(broker)
            _ = try await admin.reconcile(["alice": ["r1"], "bob": ["r1", "r2"]])
            let alice = try await Listener.connect(broker, "alice")
            let bob = try await Listener.connect(broker, "bob")
            let carol = try await Listener.connect(broker, "carol")

            // A member's cursor on its own level reaches the room's members, itself included.
            try alice.cursor("r1", #"{"x":1,"y":2}"#)
            try await bob.waitFor("tandem/v1/rooms/r1/cursors/alice", #"{"x":1,"y":2}"#)
            try await alice.waitFor("tandem/v1/rooms/r1/cursors/alice", #"{"x":1,"y":2}"#)
            try bob.cursor("r1", "b1")
            try await alice.waitFor("tandem/v1/rooms/r1/cursors/bob", "b1")

            // Refused: another member's level, a room one is not a member of, and anything
            // of a non-member's. The markers after them say they would have arrived by now.
            try alice.cursor("r1", as: "bob", "alice-as-bob")
            try alice.cursor("r2", "alice-in-r2")
            try carol.cursor("r1", "carol-in-r1")
            try carol.cursor("r1", as: "alice", "carol-as-alice")
            let aliceMarker = try alice.presenceMarker(), carolMarker = try carol.presenceMarker()
            try await bob.waitFor("tandem/v1/presence/alice/listener", aliceMarker)
            try await bob.waitFor("tandem/v1/presence/carol/listener", carolMarker)
            let refused = ["alice-as-bob", "alice-in-r2", "carol-in-r1", "carol-as-alice"]
            for text in refused {
                #expect(!bob.messages(on: nil).contains { $0.payloadString == text }, "\(text)")
            }
            // ... to alice too, who reads r1 (the forged one would be on r1/cursors/bob).
            try await alice.waitFor("tandem/v1/presence/carol/listener", carolMarker)
            #expect(!alice.messages(on: nil).contains { refused.contains($0.payloadString) })

            // A non-member receives none of the room's cursors, whatever it subscribed to
            // (`#`): once bob's marker after his cursor is with carol, the cursor was withheld.
            try bob.cursor("r1", "b2")
            try bob.cursor("r2", "b3")
            let bobMarker = try bob.presenceMarker()
            try await carol.waitFor("tandem/v1/presence/bob/listener", bobMarker)
            #expect(carol.messages(on: nil).filter { $0.topic.contains("/rooms/") }.isEmpty, "\(carol.messages(on: nil).map(\.topic))")
            // bob is the only member of r2: alice, a member of r1 alone, gets none of it.
            try await alice.waitFor("tandem/v1/rooms/r1/cursors/bob", "b2")
            try await alice.waitFor("tandem/v1/presence/bob/listener", bobMarker)
            #expect(!alice.heard("tandem/v1/rooms/r2/cursors/bob", "b3"))
            #expect(bob.heard("tandem/v1/rooms/r2/cursors/bob", "b3"))

            await admin.stop()
            for listener in [alice, bob, carol] { await listener.close() }
        }
    }

    /// A revoke (a member removed) is in force when `apply` returns: the very next cursor
    /// the removed member publishes is dropped, and the room's next cursors are withheld
    /// from it, on the same connection (modifyRole kicks nobody; mosquitto checks write
    /// access on every publish and read access on every delivery). A grant is likewise
    /// in force at once, both ways.
    @Test func aRevokedMemberStopsPublishingAndReceivingCursorsAtOnceWithoutReconnecting() async throws {
        try await withBroker(.shipped) { broker in
            let admin = try await startedAdmin(broker)
            _ = try await admin.reconcile(["alice": ["r1"], "bob": ["r1"]])
            let alice = try await Listener.connect(broker, "alice")
            let bob = try await Listener.connect(broker, "bob")
            try alice.cursor("r1", "a0")
            try await bob.waitFor("tandem/v1/rooms/r1/cursors/alice", "a0")
            try bob.cursor("r1", "b0")
            try await alice.waitFor("tandem/v1/rooms/r1/cursors/bob", "b0")
            let drops = (alice.drops, bob.drops)

            let start = ContinuousClock.now
            try await admin.apply([.revoke(user: "alice", room: "r1")])
            let applied = ContinuousClock.now - start
            // Sent at once after the revoke, both ways.
            try alice.cursor("r1", "a1")
            try bob.cursor("r1", "b1")
            let aliceMarker = try alice.presenceMarker(), bobMarker = try bob.presenceMarker()
            try await bob.waitFor("tandem/v1/presence/alice/listener", aliceMarker)
            try await alice.waitFor("tandem/v1/presence/bob/listener", bobMarker)
            let settled = ContinuousClock.now - start
            #expect(!bob.heard("tandem/v1/rooms/r1/cursors/alice", "a1"), "the removed member's cursor was delivered")
            #expect(!alice.heard("tandem/v1/rooms/r1/cursors/bob", "b1"), "the removed member received a cursor")
            #expect(bob.heard("tandem/v1/rooms/r1/cursors/bob", "b1"))
            // What proves "at once" is that the first cursors after apply returned were
            // withheld; how long the markers took is printed, never asserted (a loaded
            // machine only makes it slower: once 1.7 s in CI, with the suites in parallel).
            print("cursor revoke: apply returned after \(applied), both directions proven withheld after \(settled)")

            // Invited again: in force at once, still the same connections.
            try await admin.apply([.grant(user: "alice", room: "r1")])
            try alice.cursor("r1", "a2")
            try bob.cursor("r1", "b2")
            // The first cursors after the grant arrive (waited for, not timed).
            try await bob.waitFor("tandem/v1/rooms/r1/cursors/alice", "a2")
            try await alice.waitFor("tandem/v1/rooms/r1/cursors/bob", "b2")
            #expect(alice.drops == drops.0 && bob.drops == drops.1, "a grant or revoke disconnected a client")

            await admin.stop()
            for listener in [alice, bob] { await listener.close() }
        }
    }

    /// Roles written before cursors (a room's read ACL alone): the members read the room
    /// but cannot publish cursors in it. The next reconcile (the coordinator's, at its
    /// start) completes them on the live broker without disconnecting anyone, and an
    /// apply's grant of such a room completes it in the role that holds it.
    @Test func rolesWrittenBeforeCursorsAreCompletedWithoutAKick() async throws {
        try await withBroker(.shipped) { broker in
            let naming = RoomRoleNaming(root: "tandem/v1")
            func readOnly(_ rooms: [String]) -> JSON { .array(rooms.map { DynsecACL(type: "publishClientReceive", topic: naming.roomFilter($0), allow: true).json }) }
            try await dynsec(broker, [
                .obj(["command": "modifyRole", "rolename": "tandem-rooms-alice", "acls": readOnly(["r1", "r2"])]),
                .obj(["command": "modifyRole", "rolename": "tandem-rooms-bob", "acls": readOnly(["r1"])]),
                .obj(["command": "createRole", "rolename": "tandem-rooms-carol:2", "acls": readOnly(["r5"])]),
                .obj(["command": "addClientRole", "username": "carol", "rolename": "tandem-rooms-carol:2"]),
            ])
            let admin = try await startedAdmin(broker)
            #expect(try await admin.roomGrants() == ["alice": ["r1": [.read], "r2": [.read]], "bob": ["r1": [.read]], "carol": ["r5": [.read]]])
            let coordinator = try await Listener.connect(broker, "coordinator")
            let alice = try await Listener.connect(broker, "alice")
            let bob = try await Listener.connect(broker, "bob")
            try await coordinator.publish("tandem/v1/rooms/r1/state", "s1", retain: true)
            try await bob.waitFor("tandem/v1/rooms/r1/state", "s1")
            try alice.cursor("r1", "before")
            let marker = try alice.presenceMarker()
            try await bob.waitFor("tandem/v1/presence/alice/listener", marker)
            #expect(!bob.heard("tandem/v1/rooms/r1/cursors/alice", "before"), "no cursor grant yet")
            let drops = (alice.drops, bob.drops)

            let desired: [String: Set<String>] = ["alice": ["r1", "r2"], "bob": ["r1"], "carol": ["r5"]]
            let report = try await admin.reconcile(desired)
            #expect(report.completed == 4 && report.granted == 0 && report.revoked == 0 && report.failures.isEmpty, "\(report)")
            #expect(report.commands == 3, "\(report)")
            try alice.cursor("r1", "after")
            try await bob.waitFor("tandem/v1/rooms/r1/cursors/alice", "after")
            let whole = Set(RoomGrant.allCases)
            #expect(try await admin.roomGrants() == ["alice": ["r1": whole, "r2": whole], "bob": ["r1": whole], "carol": ["r5": whole]])
            #expect(try await admin.reconcile(desired).commands == 0)
            #expect(alice.drops == drops.0 && bob.drops == drops.1, "the upgrade disconnected a member")

            // apply: carol's r5, again read-only in her overflow role, is completed there,
            // not added a second time to her first role (a reconcile finds nothing to move).
            try await dynsec(broker, [.obj(["command": "modifyRole", "rolename": "tandem-rooms-carol:2", "acls": readOnly(["r5"])])])
            try await admin.apply([.grant(user: "carol", room: "r5")])
            #expect(try await admin.roomGrants()["carol"] == ["r5": whole])
            let settled = try await admin.reconcile(desired)
            #expect(settled.commands == 0, "\(settled)")

            await admin.stop()
            for listener in [coordinator, alice, bob] { await listener.close() }
        }
    }
}

/// Sends dynamic-security commands as the operators' `admin` with mosquitto_rr (which
/// subscribes to the answers before it asks) and requires an answer without an error.
private func dynsec(_ broker: MosquittoBroker, _ commands: [JSON]) async throws {
    let payload = String(decoding: JSON.obj(["commands": .array(commands)]).serialized(), as: UTF8.self)
    let exchange = try await ChildProcess.run("mosquitto_rr", [
        "-h", broker.host, "-p", "\(broker.port)", "-u", "admin", "-P", "admin-demo",
        "-t", "$CONTROL/dynamic-security/v1", "-e", "$CONTROL/dynamic-security/v1/response", "-m", payload, "-W", "10",
    ])
    try #require(exchange.exitCode == 0, "\(exchange.standardError)")
    #expect(exchange.standardOutput.contains("responses") && !exchange.standardOutput.contains("\"error\""), "\(exchange.standardOutput)")
}
