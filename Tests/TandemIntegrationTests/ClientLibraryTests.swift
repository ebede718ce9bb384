import Testing
import TandemClient
import TandemCore
import TestSupport

/// Issue 13's "Done when" for the SDK: a room, a chat and a mirrored workout driven
/// through `TandemClient` against the real broker and coordinator.
@Suite(.serialized) struct ClientLibraryTests {
    func client(_ broker: MosquittoBroker, _ user: String, device: String, flightInterval: Millis = 3_000) throws -> TandemClient {
        let clientId = "\(user)-\(device)"
        let transport = try MosquittoTransport(
            host: broker.host, port: broker.port, username: user, password: "\(user)-demo", user: user, clientId: clientId)
        return TandemClient(transport: transport, user: user, clientId: clientId, flightInterval: flightInterval)
    }

    @Test func roomChatAndMirroredWorkout() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try client(broker, "alice", device: "phone")
            let bob = try client(broker, "bob", device: "phone")
            let watch = try client(broker, "alice", device: "watch", flightInterval: 1_000)
            try await alice.connect()
            try await bob.connect()
            try await watch.connect()

            // A room: an optimistic create, accepted; bob's acquire is rejected and rolled back.
            let aliceRoom = try await alice.room("sdk-room")
            let bobRoom = try await bob.room("sdk-room")
            let frame = Frame(x: 1, y: 2, width: 3, height: 4)
            let created = try await alice.edit(.create, sticker: "s1", in: "sdk-room", image: "a.png", frame: frame)
            #expect(created.status == .accepted && created.version == 1, "\(created)")
            let invited = try await alice.invite("bob", to: "sdk-room")
            #expect(invited.status == .accepted && invited.version == 2, "\(invited)")
            let confirmed = try await first(aliceRoom) { $0.version >= 2 && $0.pendingEventIds.isEmpty }
            #expect(confirmed.visibleStickers.map(\.id) == ["s1"])
            #expect(confirmed.members.map(\.userId) == ["alice", "bob"] && confirmed.owner == "alice")
            _ = try await first(bobRoom) { $0.version >= 2 }
            let taken = try await bob.edit(.acquire, sticker: "s1", in: "sdk-room")
            #expect(taken.status == .rejected && taken.code == .ownedByOther, "\(taken)")
            let rolledBack = try #require(await bob.replica(of: "sdk-room"))
            #expect(rolledBack.pendingEventIds.isEmpty)
            #expect(rolledBack.visibleSticker("s1")?.owner == "alice")

            // A chat: request, accept, message; each side's replica follows.
            let bobView = try await bob.conversation(with: "alice")
            let aliceView = try await alice.conversation(with: "bob")
            #expect(try await alice.dm(.request, to: "bob", text: "hi").status == .accepted)
            _ = try await first(bobView) { $0.status == .received && $0.messages.map(\.text) == ["hi"] }
            #expect(try await bob.dm(.accept, to: "alice").status == .accepted)
            #expect(try await bob.dm(.message, to: "alice", text: "yo").status == .accepted)
            let seen = try await first(aliceView) { $0.status == .active && $0.messages.count == 2 }
            #expect(seen.messages.map(\.text) == ["hi", "yo"])
            #expect(seen.unread == 1)

            // A mirrored workout started on the watch: the watch is origin and publishes
            // throttled flight data and health; the phone mirrors it and stops it.
            let run = "sdk-run"
            let phoneState = try await alice.workout(run)
            let started = try await watch.control(.start, workout: run, from: .watch, mode: .mirrored)
            #expect(started.status == .accepted, "\(started)")
            let running = try await first(phoneState) { $0.status == .running }
            #expect(alice.startOrigin(of: .phone, in: running) == .remote)
            #expect(watch.startOrigin(of: .watch, in: running) == .local)
            let mirrored = try await alice.mirroredFlights(workout: run, origin: running.origin)
            let base = WallClock.now() - 3_000
            func flight(_ offset: Millis, _ distance: Double) -> FlightData {
                FlightData(timestamp: base + offset, elapsedTime: Double(offset) / 1000, distance: distance, pace: 300,
                           altitude: 10, heading: 90, gpwsStatus: .normal, latitude: 47.6, longitude: -122.3)
            }
            #expect(try await watch.publishFlight(flight(0, 0), workout: run, from: .watch))
            #expect(try await watch.publishFlight(flight(500, 2), workout: run, from: .watch) == false, "throttled")
            #expect(try await watch.publishFlight(flight(2_000, 10), workout: run, from: .watch))
            try await watch.publishHealth(HealthData(timestamp: base + 2_000, heartRate: 128, cadence: 170, activeEnergy: 5), workout: run)
            let last = try await first(mirrored) { $0.distance == 10 }
            #expect(last.elapsedTime == 2)
            _ = try await first(phoneState) { $0.health?.heartRate == 128 && $0.flight?.distance == 10 }
            #expect(try await alice.control(.stop, workout: run, from: .phone).status == .accepted)
            let finished = try await first(phoneState) { $0.status == .finished }
            #expect(finished.summary?.distance == 10)
            #expect(finished.summary?.maxHeartRate == 128)
            #expect(await alice.pendingCount == 0)

            await alice.close()
            await bob.close()
            await watch.close()
            _ = await coordinator.stop()
        }
    }

    /// A user's own room list follows invitations, roles and removals; the room's
    /// stream carries the members; invite, role and remove return their receipts.
    @Test func myRoomsFollowInvitesRolesAndRemovals() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try client(broker, "alice", device: "phone")
            let bob = try client(broker, "bob", device: "phone")
            try await alice.connect()
            try await bob.connect()
            let bobsRooms = try await bob.myRooms()
            let bobsView = try await bob.room("club")

            let made = try await alice.invite("bob", to: "club", as: .viewer)
            #expect(made.status == .accepted && made.version == 1, "\(made)")
            let invited = try await first(bobsRooms) { $0.map(\.roomId) == ["club"] }
            #expect(invited.first?.role == .viewer && invited.first?.owner == "alice" && invited.first?.invitedBy == "alice")
            let seen = try await first(bobsView) { $0.version >= 1 }
            #expect(seen.members.map(\.userId) == ["alice", "bob"])

            #expect(try await alice.setRole(.editor, of: "bob", in: "club").status == .accepted)
            _ = try await first(bobsRooms) { $0.first?.role == .editor }
            let refused = try await bob.invite("carol", to: "club")
            #expect(refused.status == .rejected && refused.code == .forbidden, "\(refused)")
            let bobsUpdates = try await bob.roomUpdates("club")
            #expect(try await alice.remove("bob", from: "club").status == .accepted)
            _ = try await first(bobsRooms) { $0.isEmpty }
            // bob's room streams end, the last update saying why.
            var last: RoomUpdate?
            for await update in bobsUpdates { last = update }
            if case .noLongerMember(.removed)? = last?.cause {} else { Issue.record("the last update: \(String(describing: last?.cause))") }
            let gone = try await bob.edit(.create, sticker: "s1", in: "club", image: "b.png", frame: Frame(x: 0, y: 0, width: 1, height: 1))
            #expect(gone.code == .notMember, "\(gone)")

            // Invited again, bob watches the room again: its snapshot comes, though the
            // first watch's subscription is still there (and may be paused).
            #expect(try await alice.invite("bob", to: "club", as: .viewer).status == .accepted)
            _ = try await first(bobsRooms) { $0.map(\.roomId) == ["club"] }
            let again = try await bob.room("club")
            let back = try await first(again) { $0.members.contains { $0.userId == "bob" } }
            #expect(back.owner == "alice")
            await alice.close()
            await bob.close()
            await coordinator.stop()
        }
    }

    /// `onlineUsers(among:)` follows only the users named (and those added later),
    /// `presence/{user}/+` each: carol, online first, is not in alice's set until alice
    /// follows her, and leaves it when she closes.
    @Test func onlineUsersAmongFollowsOnlyThoseNamed() async throws {
        try await withBroker(.shipped) { broker in
            let alice = try client(broker, "alice", device: "web")
            let bob = try client(broker, "bob", device: "phone")
            let carol = try client(broker, "carol", device: "phone")
            let online = try await alice.onlineUsers(among: ["alice", "bob"])
            try await alice.connect()
            try await carol.connect()
            try await bob.connect()
            let withBob = try await first(online) { $0.contains("bob") }
            #expect(withBob == ["alice", "bob"], "carol was online before bob, and is not followed")
            try await alice.followPresence(of: ["carol", "bob"])
            _ = try await first(online) { $0 == ["alice", "bob", "carol"] }
            await carol.close()
            _ = try await first(online) { $0 == ["alice", "bob"] }
            await bob.close()
            await alice.close()
        }
    }
}
