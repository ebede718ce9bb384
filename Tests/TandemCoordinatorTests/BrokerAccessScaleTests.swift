import Foundation
import TandemCoordinator
import Testing
import TestSupport

/// Measurements, not checks of speed: 10,000 rooms with 2-3 of 20 users each, reconciled
/// from an empty broker and again when it matches; one grant from the call to the
/// member's retained snapshot, on a small and on a large file. Prints the figures
/// (docs/PERFORMANCE.md). Minutes of broker work, so only on request:
///
///     TANDEM_DYNSEC_SCALE=1 swift test --skip-build --filter BrokerAccessScaleTests
@Suite(.enabled(if: ProcessInfo.processInfo.environment["TANDEM_DYNSEC_SCALE"] != nil))
struct BrokerAccessScaleTests {
    @Test func tenThousandRooms() async throws {
        let users = (0..<20).map { String(format: "u%02d", $0) }
        let folder = try makeTemporaryDirectory(prefix: "dynsec-scale-")
        let generated = try await ChildProcess.run("/usr/bin/env", [
            "python3", MosquittoBroker.repositoryRoot + "/scripts/gen-broker-auth", folder,
            "coordinator:coordinator-demo", "coordinator-admin:coordinator-admin-demo", "admin:admin-demo",
        ] + users.map { "\($0):\($0)-demo" })
        try #require(generated.exitCode == 0, "\(generated.standardError)")
        var generator = SystemRandomNumberGenerator()
        var desired: [String: Set<String>] = [:]
        for room in 0..<10_000 {
            for user in users.shuffled(using: &generator).prefix(Int.random(in: 2...3, using: &generator)) {
                desired[user, default: []].insert("room-\(room)")
            }
        }
        try await withBroker(.generated(folder)) { broker in
            let bytes = ProcessInfo.processInfo.environment["TANDEM_DYNSEC_SCALE_MESSAGE_BYTES"].flatMap { Int($0) } ?? BrokerAccessAdmin.defaultMaxMessageBytes
            let admin = try await startedAdmin(broker, maxMessageBytes: bytes)
            let coordinator = try await Listener.connect(broker, "coordinator")
            let member = try await Listener.connect(broker, "u00")

            func grantTimes(_ label: String, count: Int) async throws {
                var applied: [Duration] = []
                var delivered: [Duration] = []
                for i in 0..<count {
                    let room = "grant-\(label)-\(i)"
                    // As the coordinator does: the grant, then the snapshot that shows it
                    // (no kick: the member's subscription delivers it).
                    let start = ContinuousClock.now
                    try await admin.apply([.grant(user: "u00", room: room)])
                    applied.append(ContinuousClock.now - start)
                    try await coordinator.publish("tandem/v1/rooms/\(room)/state", room, retain: true)
                    try await member.waitFor("tandem/v1/rooms/\(room)/state", room, timeout: .seconds(30))
                    delivered.append(ContinuousClock.now - start)
                }
                print("dynsec scale: grant on the \(label) file: apply \(applied.map(ms)) ms; to the member's snapshot \(delivered.map(ms)) ms")
            }
            try await grantTimes("small", count: 5)

            let fromEmpty = ContinuousClock.now
            let first = try await admin.reconcile(desired)
            let fromEmptyTime = ContinuousClock.now - fromEmpty
            #expect(first.failures.isEmpty, "\(first.failures.prefix(3))")
            let size = (try? FileManager.default.attributesOfItem(atPath: broker.dynamicSecurityPath!)[.size] as? Int) ?? 0
            print("dynsec scale: reconcile from empty: \(ms(fromEmptyTime)) ms, \(first.granted) grants, \(first.commands) commands in \(first.messages) messages; file \(size / 1024) KiB")

            let read = ContinuousClock.now
            _ = try await admin.readableRooms()
            print("dynsec scale: reading the broker's state (listClients + listRoles, verbose, parsed): \(ms(ContinuousClock.now - read)) ms")

            let matching = ContinuousClock.now
            let second = try await admin.reconcile(desired)
            print("dynsec scale: reconcile when matching: \(ms(ContinuousClock.now - matching)) ms, \(second.commands) commands in \(second.messages) messages")
            #expect(second.commands == 0)

            // One user's rooms changed by 1%: the rewrite is a few roles.
            var changed = desired
            let some = Array(changed["u05"]!.prefix(12))
            changed["u05"]!.subtract(some)
            changed["u06"]!.formUnion(some)
            let partial = ContinuousClock.now
            let third = try await admin.reconcile(changed)
            print("dynsec scale: reconcile after 12 rooms moved from u05 to u06: \(ms(ContinuousClock.now - partial)) ms, \(third.commands) commands in \(third.messages) messages")

            try await grantTimes("large", count: 5)
            #expect(try await admin.readableRooms()["u06"] == changed["u06"])
            await admin.stop()
            await coordinator.close()
            await member.close()
        }
    }
}

func ms(_ duration: Duration) -> Int {
    Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
}
