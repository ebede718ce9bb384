import Foundation
import Testing
import TandemCore
import TandemStore
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Issue 7 (2): the database file is corrupt, unwritable or on a full disk. Each is a
/// clear error on stderr and a non-zero exit (never a signal), and the file is left as
/// it was: a crash loop under a supervisor cannot make things worse. A commit that fails
/// mid-run stops the coordinator before the batch's receipts go out, so nothing a client
/// was told "accepted" is missing afterwards. And `--backup` copies a live database.
@Suite(.serialized) struct StorageFaultTests {
    static var binary: String { CoordinatorProcess.binary("tandem-coordinator") }

    static func run(_ broker: MosquittoBroker, database: String, _ extra: [String] = []) async throws -> ChildProcess.Completed {
        try await ChildProcess.run(
            binary, ["--host", broker.host, "--port", "\(broker.port)", "--database", database] + extra,
            timeout: .seconds(30))
    }

    // MARK: Corrupt

    @Test func aFileOfGarbageIsRefusedAndLeftUntouched() async throws {
        try await withBroker(.open) { broker in
            let directory = try temporaryDirectory()
            let path = directory + "/tandem.sqlite"
            var rng = TestRandom(seed: 7)
            let garbage = (0..<16_384).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            try Data(garbage).write(to: URL(fileURLWithPath: path))

            let started = try await Self.run(broker, database: path)
            #expect(started.termination == .exited(1), "\(started.termination): \(started.standardError)")
            #expect(started.standardError.contains(path), "\(started.standardError)")
            #expect(started.standardError.contains("not a database"), "\(started.standardError)")
            let checked = try await Self.run(broker, database: path, ["--check"])
            #expect(checked.termination == .exited(1))
            #expect(checked.standardError.contains("not a database"), "\(checked.standardError)")
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == garbage)
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        }
    }

    @Test func aDatabaseWithDamagedPagesFailsItsCheck() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            for i in 0..<30 {
                try await alice.edit(room: "r", .edit("e\(i)", "create", sticker: "s\(i)", at: nowMillis() + Int64(i), image: String(repeating: "i", count: 200), frame: (1, 1, 1, 1)))
            }
            try await alice.receipt("e29", timeout: .seconds(20))
            await alice.close()
            #expect(await coordinator.stop() == 0)
            let path = coordinator.databasePath
            // A clean stop checkpoints the WAL into the file; damage every page but the first.
            var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
            let pageSize = 4096
            try #require(bytes.count > 3 * pageSize)
            for i in stride(from: pageSize, to: bytes.count, by: 7) { bytes[i] ^= 0x5A }
            try Data(bytes).write(to: URL(fileURLWithPath: path))

            let checked = try await Self.run(broker, database: path, ["--check"])
            #expect(checked.termination == .exited(1), "\(checked.standardOutput)\(checked.standardError)")
            #expect(!checked.standardOutput.contains("integrity: ok"))
            let started = try await Self.run(broker, database: path, ["--username", "coordinator", "--password", "coordinator-demo"])
            // Recovery reads every room: a damaged one is an error, not a half-loaded start.
            #expect(started.termination == .exited(1), "\(started.termination): \(started.standardError)")
            #expect(started.standardError.contains("malformed") || started.standardError.contains("corrupt") || started.standardError.contains("not a database"),
                    "\(started.standardError)")
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        }
    }

    // MARK: Unwritable

    @Test func aDatabasePathUnderAFileIsAClearError() async throws {
        try await withBroker(.open) { broker in
            let directory = try temporaryDirectory()
            let file = directory + "/plain-file"
            try Data("not a directory".utf8).write(to: URL(fileURLWithPath: file))
            let result = try await Self.run(broker, database: file + "/tandem.sqlite")
            #expect(result.termination == .exited(1), "\(result.termination)")
            #expect(result.standardError.contains(file), "\(result.standardError)")
        }
    }

    @Test func aReadOnlyDatabaseIsAClearErrorAndStaysAsItWas() async throws {
        try await withBroker(.open) { broker in
            let directory = try temporaryDirectory()
            let databaseDirectory = directory + "/db"
            let path = databaseDirectory + "/tandem.sqlite"
            let coordinator = try await CoordinatorProcess.start(broker: broker, databasePath: path)
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            try await alice.edit(room: "r", .edit("e1", "create", sticker: "s1", image: "i.png", frame: (1, 1, 1, 1)))
            try await alice.receipt("e1", timeout: .seconds(20))
            await alice.close()
            #expect(await coordinator.stop() == 0)
            let before = try Data(contentsOf: URL(fileURLWithPath: path))

            // As root, permissions stop nothing: make the directory a read-only bind mount.
            let readOnly = try await ReadOnlyDirectory(databaseDirectory)
            let result = try await Self.run(broker, database: path)
            await readOnly.undo()
            print("StorageFaultTests: read-only database (\(readOnly.how)): \(result.termination); \(result.standardError.split(separator: "\n").last ?? "")")
            #expect(result.termination == .exited(1), "\(result.termination): \(result.standardError)")
            #expect(result.standardError.contains(path), "\(result.standardError)")
            #expect(result.standardError.lowercased().contains("readonly") || result.standardError.contains("read-only")
                    || result.standardError.contains("unable to open"), "\(result.standardError)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        }
    }

    // MARK: Disk full

    /// The database on a 1 MiB tmpfs (as root) that a filler file then fills, or, where
    /// mounting is not possible, under a 1 MiB file-size limit (RLIMIT_FSIZE, SIGXFSZ
    /// ignored). DM messages of 3 KB go in until a commit fails.
    @Test(.timeLimit(.minutes(2)))
    func aFullDiskStopsTheCoordinatorAndLosesNothingItAnswered() async throws {
        try await withBroker(.shipped) { broker in
            let directory = try temporaryDirectory()
            let databaseDirectory = directory + "/db"
            try FileManager.default.createDirectory(atPath: databaseDirectory, withIntermediateDirectories: true)
            let path = databaseDirectory + "/tandem.sqlite"
            // TANDEM_TEST_NO_MOUNT=1 takes the RLIMIT_FSIZE path even where mounting works.
            var mounted = false
            if ProcessInfo.processInfo.environment["TANDEM_TEST_NO_MOUNT"] == nil {
                let mount = try await ChildProcess.run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", databaseDirectory])
                mounted = mount.exitCode == 0
            }
            func unmount() async {
                if mounted { _ = try? await ChildProcess.run("umount", ["-l", databaseDirectory]) }
            }
            func scenario() async throws {
                let flags = ["--host", broker.host, "--port", "\(broker.port)", "--database", path,
                             "--username", "coordinator", "--password", "coordinator-demo", "--log-level", "info"]
                let limited: ChildProcess
                if mounted {
                    limited = try await startCoordinator(Self.binary, flags, broker: broker)
                } else {
                    limited = try await startCoordinator(
                        "bash", ["-c", "trap '' XFSZ; ulimit -f 1024; exec \"$0\" \"$@\"", Self.binary] + flags, broker: broker)
                }
                let alice = try await TestPeer.connect(broker: broker, user: "alice")
                let bob = try await TestPeer.connect(broker: broker, user: "bob")
                let t = nowMillis()
                try await alice.dm(.obj(["commandId": "req", "type": "request", "peer": "bob", "timestamp": .int(t)]))
                try await alice.receipt("req", timeout: .seconds(20))
                try await bob.dm(.obj(["commandId": "acc", "type": "accept", "peer": "alice", "timestamp": .int(t + 1)]))
                try await bob.receipt("acc", timeout: .seconds(20))
                // Some messages are accepted (and so on disk) before the disk fills.
                let text = String(repeating: "x", count: 3_000)
                var sent: [String] = []
                for i in 0..<5 {
                    sent.append("before\(i)")
                    try await alice.dm(.obj(["commandId": .string("before\(i)"), "type": "message", "peer": "bob", "timestamp": .int(nowMillis()), "text": .string(text)]))
                    #expect(try await alice.receipt("before\(i)", timeout: .seconds(20))["status"] == "accepted")
                }
                if mounted {
                    // Fill what is left; dd stops at ENOSPC.
                    _ = try await ChildProcess.run("dd", ["if=/dev/zero", "of=\(databaseDirectory)/filler", "bs=16k"])
                }

                for i in 0..<800 where limited.isRunning {
                    let id = "m\(i)"
                    sent.append(id)
                    try await alice.dm(.obj(["commandId": .string(id), "type": "message", "peer": "bob", "timestamp": .int(nowMillis()), "text": .string(text)]))
                    _ = try? await alice.receipt(id, timeout: .seconds(3))
                }
                let termination = await limited.waitForTermination(timeout: .seconds(20))
                let stderr = limited.standardError
                print("StorageFaultTests: disk full (\(mounted ? "1 MiB tmpfs" : "RLIMIT_FSIZE 1 MiB")) after \(sent.count) messages: \(termination.map(\.description) ?? "still running"); \(stderr.split(separator: "\n").suffix(2).joined(separator: " | "))")
                #expect(termination == .exited(1), "\(stderr.suffix(2000))")
                #expect(stderr.contains("full") || stderr.contains("I/O error"), "\(stderr.suffix(2000))")

                // Everything alice was told "accepted" is in the database; the failed batch is not.
                let accepted = Set(sent.filter { alice.receipts(id: $0).contains { $0["status"] == "accepted" } })
                let unanswered = sent.filter { alice.receipts(id: $0).isEmpty }
                #expect(!unanswered.isEmpty)
                #expect(accepted.count >= 5)
                if mounted { try FileManager.default.removeItem(atPath: databaseDirectory + "/filler") }
                let logged = try await readEventLog(path)
                let loggedIds = Set(logged.map(\.id))
                #expect(accepted.isSubset(of: loggedIds), "accepted but not stored: \(accepted.subtracting(loggedIds).sorted())")
                #expect(Set(unanswered).isDisjoint(with: loggedIds), "stored without a receipt: \(Set(unanswered).intersection(loggedIds).sorted())")

                // With room again, a restart resumes; the resent messages are applied once.
                let check = try await Self.run(broker, database: path, ["--check"])
                #expect(check.standardOutput.contains("integrity: ok"), "\(check.standardOutput)\(check.standardError)")
                let again = try await startCoordinator(Self.binary, flags, broker: broker)
                for id in unanswered {
                    try await alice.dm(.obj(["commandId": .string(id), "type": "message", "peer": "bob", "timestamp": .int(nowMillis()), "text": .string(text)]))
                    #expect(try await alice.receipt(id, timeout: .seconds(20))["status"] == "accepted")
                }
                await alice.close()
                await bob.close()
                again.signal(SIGTERM)
                #expect(await again.waitForExit(timeout: .seconds(15)) == 0)
                print("StorageFaultTests: \(accepted.count) accepted before the disk filled, \(unanswered.count) unanswered and resent after")
            }
            do {
                try await scenario()
            } catch {
                await unmount()
                throw error
            }
            await unmount()
        }
    }

    // MARK: Backup while running

    @Test(.timeLimit(.minutes(2)))
    func aBackupTakenWhileRunningRestoresTheSameState() async throws {
        try await withBroker(.shipped) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker)
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let directory = try temporaryDirectory()

            // A backup under load: events keep coming while VACUUM INTO reads.
            let load = Task {
                for i in 0..<200 {
                    try await alice.edit(room: "b", .edit("e\(i)", "create", sticker: "s\(i)", at: nowMillis(), image: "i.png", frame: (Double(i), 0, 1, 1)))
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            let underLoad = try await Self.run(broker, database: coordinator.databasePath, ["--backup", directory + "/under-load.sqlite"])
            try await load.value
            #expect(underLoad.exitCode == 0, "\(underLoad.standardError)")
            #expect(underLoad.standardOutput.contains("integrity: ok"), "\(underLoad.standardOutput)")
            try await alice.receipt("e199", timeout: .seconds(20))
            let live = try await alice.roomState("b", version: 200)

            // A backup of the idle, still running coordinator restores into a new one.
            let copy = directory + "/copy.sqlite"
            let backup = try await Self.run(broker, database: coordinator.databasePath, ["--backup", copy])
            #expect(backup.exitCode == 0, "\(backup.standardError)")
            #expect(coordinator.process?.isRunning == true)
            let refused = try await Self.run(broker, database: coordinator.databasePath, ["--backup", copy])
            #expect(refused.exitCode == 1, "an existing file is never overwritten")
            await alice.close()

            try await withBroker(.shipped) { other in
                let restoredDirectory = try temporaryDirectory()
                try FileManager.default.copyItem(atPath: copy, toPath: restoredDirectory + "/tandem.sqlite")
                let restored = try await CoordinatorProcess.start(broker: other, databaseDirectory: restoredDirectory)
                // A new broker knows nothing of room b: the restored coordinator's start
                // reconcile gives its member (alice) the right to read it again.
                let reader = try await TestPeer.connect(broker: other, user: "alice")
                let state = try await reader.roomState("b", version: 200)
                #expect(state == live)
                await reader.close()
                #expect(await restored.stop() == 0)
            }
            #expect(await coordinator.stop() == 0)
        }
    }
}

/// Starts the coordinator through `executable` (itself, or a launcher) and waits for
/// its online status.
func startCoordinator(_ executable: String, _ arguments: [String], broker: MosquittoBroker) async throws -> ChildProcess {
    let before = nowMillis() - 1
    let child = try ChildProcess(executable, arguments)
    let watcher = try await TestPeer.connect(broker: broker, user: "watcher", asCoordinatorWatcher: true)
    defer { Task { await watcher.close() } }
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline {
        if let status = watcher.latest(on: Topics().coordinatorStatus), status["online"] == true,
           let startedAt = status["startedAt"]?.int64Value, startedAt >= before {
            return child
        }
        if !child.isRunning { throw CoordinatorProcess.CoordinatorError.exited(child.standardError) }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw CoordinatorProcess.CoordinatorError.notOnline(child.standardError)
}

/// A directory made read-only for the coordinator: chmod for an ordinary user; as root
/// (whom permissions do not stop) a read-only bind mount of the directory onto itself.
final class ReadOnlyDirectory: Sendable {
    let path: String
    let how: String

    init(_ path: String) async throws {
        self.path = path
        if geteuid() != 0 {
            chmod(path, 0o555)
            for file in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { chmod(path + "/" + file, 0o444) }
            how = "chmod"
            return
        }
        let bind = try await ChildProcess.run("mount", ["--bind", path, path])
        try #require(bind.exitCode == 0, "mount --bind: \(bind.standardError)")
        let remount = try await ChildProcess.run("mount", ["-o", "remount,ro,bind", path])
        try #require(remount.exitCode == 0, "remount ro: \(remount.standardError)")
        how = "read-only bind mount"
    }

    func undo() async {
        if how == "chmod" {
            chmod(path, 0o755)
        } else {
            _ = try? await ChildProcess.run("umount", [path])
        }
    }
}

func temporaryDirectory() throws -> String {
    let path = FileManager.default.temporaryDirectory.path + "/tandem-storage-\(UInt64.random(in: 0...UInt64.max))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
