import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 11 (3), against the real binary: the coordinator runs under libfaketime
/// (Debian's `faketime`), whose offset the test changes while the coordinator runs
/// (`FAKETIME_TIMESTAMP_FILE`, re-read on every call), with the monotonic clock left
/// alone (`FAKETIME_DONT_FAKE_MONOTONIC`), as NTP or an operator stepping the clock
/// would. An hour either way, under a steady stream of events: none waits past its
/// window (each is answered), and a held lock neither expires at the step nor outlives
/// its lease.
///
/// libfaketime (0.9.10) also moves every absolute timerfd deadline by its offset,
/// monotonic ones included, which no real clock step does: under +1 h, libdispatch's
/// and SwiftNIO's timers (every `Task.sleep` of the coordinator) were set an hour in
/// the past, which the kernel refuses (EINVAL) on a machine up for less than an hour,
/// so nothing timed ever woke and the first event waited for the next message. That
/// made the test pass or fail with the machine's uptime. A small preloaded library
/// (Tests/Fixtures/timerfd-passthrough.c, built here with the C compiler) takes
/// `timerfd_settime` back to the kernel, so the coordinator sees the wall clock step
/// and nothing else, as with NTP. The backward step goes from +1 h to +0: a negative
/// offset (+0 to -1 h) passed here too, but hung once in a full run, in a timed wait
/// libfaketime still wraps (it wraps sem_timedwait, pthread_cond_timedwait, poll...).
/// ClockStepTests checks both directions in-process with an injected clock.
@Suite(.serialized) struct WallClockStepTests {
    static var libfaketime: String? {
        ["/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
         "/usr/lib/faketime/libfaketime.so.1"].first { FileManager.default.fileExists(atPath: $0) }
    }

    /// The pass-through library, compiled once per test run.
    static let passthrough: Result<String, any Error> = Result {
        let directory = try makeTemporaryDirectory(prefix: "timerfd-")
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/timerfd-passthrough.c").path
        let library = directory + "/libtimerfd-passthrough.so"
        let compiler = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "cc"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: compiler)
        process.arguments = ["-shared", "-fPIC", "-O2", "-o", library, source]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw PassthroughBuildFailed(description: "\(compiler) could not build \(source) (exit \(process.terminationStatus))")
        }
        return library
    }

    // A guard against a hang, not a timing: in the full suite, beside the failover tests,
    // one case has taken 45-66 s (9 s alone), so a minute was too tight.
    @Test(.timeLimit(.minutes(3)), arguments: [("+0", "+1h"), ("+1h", "+0")])
    func aWallClockSteppedAnHourUnderLoad(_ from: String, _ step: String) async throws {
        let library = try #require(Self.libfaketime, "libfaketime is not installed: apt-get install faketime")
        let passthrough = try Self.passthrough.get()
        let directory = try makeTemporaryDirectory(prefix: "clockstep-")
        let offsetFile = directory + "/offset"
        try "\(from)\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(
                broker: broker, arguments: ["--lock-lease-seconds", "3"],
                environment: [
                    "LD_PRELOAD": "\(passthrough) \(library)", "FAKETIME_TIMESTAMP_FILE": offsetFile, "FAKETIME_NO_CACHE": "1",
                    "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                ])
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            let carol = try await TestPeer.connect(broker: broker, user: "carol")
            // The room first (its members), then the lock, so the lease starts last.
            try await alice.invite(room: "clock", ["bob", "carol"])
            try await alice.edit(room: "clock", .edit("c1", "create", sticker: "held", image: "a.png", frame: (0, 0, 1, 1)))
            #expect(try await alice.receipt("c1")["status"] == "accepted")

            // carol's stream: an event every 10 ms, before, across and after the step.
            let stream = Task { () throws -> [String] in
                var ids: [String] = []
                for i in 0..<250 {
                    let id = "s\(i)"
                    try await carol.edit(room: "clock", .edit(id, "create", sticker: "carol-\(i)", image: "c.png", frame: (1, 1, 1, 1)))
                    ids.append(id)
                    try await Task.sleep(for: .milliseconds(10))
                }
                return ids
            }
            try await Task.sleep(for: .seconds(1))
            try "\(step)\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
            let steppedAt = ContinuousClock.now

            // Right after the step alice's lock (taken ~1 s ago, lease 3 s) is still hers.
            try await bob.edit(room: "clock", .edit("b1", "acquire", sticker: "held"))
            let refused = try await bob.receipt("b1")
            #expect(refused["code"] == "owned_by_other", "\(refused.text)")

            // Every event of the stream is answered: none waits for the wall clock.
            let ids = try await stream.value
            for id in ids {
                let receipt = try await carol.receipt(id, timeout: .seconds(10))
                #expect(receipt["status"] == "accepted", "\(id): \(receipt.text)")
            }

            // The lease runs out on time (3 s after alice's create, on the monotonic clock).
            try await Task.sleep(until: steppedAt + .seconds(3))
            var taken = false
            for attempt in 0..<20 where !taken {
                let id = "b-late-\(attempt)"
                try await bob.edit(room: "clock", .edit(id, "acquire", sticker: "held"))
                taken = try await bob.receipt(id)["status"] == "accepted"
                if !taken { try await Task.sleep(for: .milliseconds(250)) }
            }
            #expect(taken, "alice's lock was never released")
            let log = coordinator.standardError
            await alice.close()
            await bob.close()
            await carol.close()
            #expect(await coordinator.stop() == 0, "\(log.suffix(2000))")
        }
    }
}

struct PassthroughBuildFailed: Error, CustomStringConvertible {
    let description: String
}
