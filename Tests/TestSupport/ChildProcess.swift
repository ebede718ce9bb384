#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// A child process started with `posix_spawn`, for tests: a broker, a built
/// executable, a command-line client.
///
/// Why not Foundation's `Process`: started from async code on this toolchain, its
/// child inherits a signal mask that blocks SIGTERM, so `terminate()` never stops it.
/// Here the child starts with an empty signal mask and the default action for
/// SIGTERM, SIGINT and SIGPIPE, whatever the test process has blocked or ignored.
///
/// Standard input is `/dev/null` unless a file is given (the way a script pipes
/// commands in: the child reads the file, then sees end of file); standard output and standard error go to files
/// (by default in a temporary directory of the process's own, removed on deinit),
/// read back with ``standardOutput`` and ``standardError``. A child still running
/// when the value is released is killed with SIGKILL and reaped.
public final class ChildProcess: Sendable {
    /// How a child ended.
    public enum Termination: Sendable, Equatable, CustomStringConvertible {
        case exited(Int32)
        case signaled(Int32)

        /// The exit code, or 128 + the signal number (the shell's convention).
        public var code: Int32 {
            switch self {
            case .exited(let code): code
            case .signaled(let signal): 128 + signal
            }
        }

        public var description: String {
            switch self {
            case .exited(let code): "exit code \(code)"
            case .signaled(let signal): "signal \(signal)"
            }
        }
    }

    /// What ``run(_:_:environment:timeout:)`` hands back.
    public struct Completed: Sendable {
        public let termination: Termination
        public let standardOutput: String
        public let standardError: String
        public var exitCode: Int32 { termination.code }
    }

    public let pid: pid_t
    public let executable: String
    public let arguments: [String]
    public let standardOutputPath: String
    public let standardErrorPath: String

    /// Set once the child has been reaped (by whoever called waitpid first).
    private let reaped: Mutex<Termination?>
    /// A directory this value created for the output files, removed on deinit.
    private let ownedDirectory: String?

    /// Starts `executable` (a path, or a name looked up with ``findExecutable(_:)``).
    ///
    /// - Parameters:
    ///   - environment: the child's whole environment; `nil` inherits this process's.
    ///   - addingEnvironment: set on top of `environment` (or the inherited one).
    ///   - standardInput: a file the child reads as its stdin; `nil` means `/dev/null`.
    ///   - standardOutput, standardError: files to write to (created or truncated);
    ///     `nil` means a file in a private temporary directory. The same path for
    ///     both interleaves them in one file.
    public init(
        _ executable: String,
        _ arguments: [String] = [],
        environment: [String: String]? = nil,
        addingEnvironment: [String: String] = [:],
        standardInput: String? = nil,
        standardOutput: String? = nil,
        standardError: String? = nil
    ) throws {
        guard let path = Self.findExecutable(executable) else {
            throw ChildProcessError.notFound(executable)
        }
        var ownedDirectory: String?
        func privateFile(_ name: String) throws -> String {
            if ownedDirectory == nil {
                ownedDirectory = try makeTemporaryDirectory(prefix: "child-")
            }
            return ownedDirectory! + "/" + name
        }
        let outPath = try standardOutput ?? privateFile("stdout")
        let errPath = try standardError ?? privateFile("stderr")

        var env = environment ?? ProcessInfo.processInfo.environment
        env.merge(addingEnvironment) { _, new in new }

        do {
            self.pid = try Self.spawn(
                path, arguments, environment: env, stdin: standardInput ?? "/dev/null", stdout: outPath, stderr: errPath)
        } catch {
            if let ownedDirectory { try? FileManager.default.removeItem(atPath: ownedDirectory) }
            throw error
        }
        self.executable = path
        self.arguments = arguments
        self.standardOutputPath = outPath
        self.standardErrorPath = errPath
        self.ownedDirectory = ownedDirectory
        self.reaped = Mutex(nil)
    }

    deinit {
        reaped.withLock { termination in
            guard termination == nil else { return }
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            termination = Self.termination(fromWaitStatus: status)
        }
        if let ownedDirectory { try? FileManager.default.removeItem(atPath: ownedDirectory) }
    }

    /// Runs a command to completion and returns what it printed. A command still
    /// running after `timeout` is killed and ``ChildProcessError/timedOut(_:_:)`` thrown.
    public static func run(
        _ executable: String,
        _ arguments: [String] = [],
        environment: [String: String]? = nil,
        timeout: Duration = .seconds(30)
    ) async throws -> Completed {
        let child = try ChildProcess(executable, arguments, environment: environment)
        guard let termination = await child.waitForTermination(timeout: timeout) else {
            child.signal(SIGKILL)
            _ = await child.waitForTermination(timeout: .seconds(5))
            throw ChildProcessError.timedOut(child.commandLine, timeout)
        }
        return Completed(
            termination: termination,
            standardOutput: child.standardOutput,
            standardError: child.standardError)
    }

    /// The command line, for messages.
    public var commandLine: String {
        ([executable] + arguments).joined(separator: " ")
    }

    /// Sends `signal` (SIGTERM, SIGINT, SIGKILL, ...) unless the child was already
    /// reaped (its pid may belong to someone else by now).
    public func signal(_ signal: Int32) {
        reaped.withLock { termination in
            if termination == nil { kill(pid, signal) }
        }
    }

    /// Whether the child is still running (reaps it if it has ended).
    public var isRunning: Bool { poll() == nil }

    /// How the child ended, if it has (reaps it if it has ended).
    public var termination: Termination? { poll() }

    /// Waits until the child ends: its exit code (128 + signal if a signal ended it),
    /// or nil if it is still running after `timeout`.
    public func waitForExit(timeout: Duration) async -> Int32? {
        await waitForTermination(timeout: timeout)?.code
    }

    /// Waits until the child ends, or nil if it is still running after `timeout`.
    /// Polls `waitpid(WNOHANG)` with short sleeps: no thread is blocked.
    public func waitForTermination(timeout: Duration) async -> Termination? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var pause = Duration.milliseconds(1)
        while true {
            if let termination = poll() { return termination }
            if clock.now >= deadline { return nil }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(20))
        }
    }

    /// What the child has written to standard output so far.
    public var standardOutput: String { Self.read(standardOutputPath) }

    /// What the child has written to standard error so far.
    public var standardError: String { Self.read(standardErrorPath) }

    // MARK: - Finding executables

    /// `name` itself if it contains a slash; else the first executable of that name
    /// on PATH, then in the sbin directories (Debian puts mosquitto in /usr/sbin,
    /// which is not on every user's PATH).
    public static func findExecutable(_ name: String) -> String? {
        if name.contains("/") {
            return access(name, X_OK) == 0 ? name : nil
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init)
            + ["/usr/local/sbin", "/usr/sbin", "/sbin", "/opt/homebrew/sbin", "/opt/homebrew/bin"]
        for directory in directories where !directory.isEmpty {
            let candidate = directory + "/" + name
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    // MARK: - Internals

    private func poll() -> Termination? {
        reaped.withLock { termination in
            if let termination { return termination }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                termination = Self.termination(fromWaitStatus: status)
            } else if result == -1 && errno == ECHILD {
                // Reaped by someone else (e.g. a SIGCHLD handler): it has ended, how
                // is unknown.
                termination = .exited(-1)
            }
            return termination
        }
    }

    /// WIFEXITED/WEXITSTATUS/WTERMSIG are C macros Swift cannot import.
    private static func termination(fromWaitStatus status: Int32) -> Termination {
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
    }

    private static func read(_ path: String) -> String {
        guard let data = FileManager.default.contents(atPath: path) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    private static func spawn(
        _ path: String, _ arguments: [String], environment: [String: String],
        stdin: String, stdout: String, stderr: String
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        let writeFlags = O_WRONLY | O_CREAT | O_TRUNC
        try check(posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0), "stdin")
        try check(posix_spawn_file_actions_addopen(&actions, 1, stdout, writeFlags, 0o644), "stdout")
        if stderr == stdout {
            try check(posix_spawn_file_actions_adddup2(&actions, 1, 2), "stderr")
        } else {
            try check(posix_spawn_file_actions_addopen(&actions, 2, stderr, writeFlags, 0o644), "stderr")
        }

        var attributes = posix_spawnattr_t()
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }
        // The pitfall this type exists for: start with nothing blocked...
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        try check(posix_spawnattr_setsigmask(&attributes, &noSignals), "setsigmask")
        // ...and with the default action for the signals tests send or that a
        // test runner may ignore (an ignored SIGPIPE survives exec).
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGHUP] { sigaddset(&defaults, signal) }
        try check(posix_spawnattr_setsigdefault(&attributes, &defaults), "setsigdefault")
        try check(
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)),
            "setflags")

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw ChildProcessError.spawnFailed(path, String(cString: strerror(result)))
        }
        return pid
    }

    private static func check(_ result: Int32, _ what: String) throws {
        guard result == 0 else {
            throw ChildProcessError.spawnFailed(what, String(cString: strerror(result)))
        }
    }
}

public enum ChildProcessError: Error, CustomStringConvertible {
    case notFound(String)
    case spawnFailed(String, String)
    case timedOut(String, Duration)

    public var description: String {
        switch self {
        case .notFound(let name):
            "\(name): no such executable (looked on PATH and in the sbin directories)"
        case .spawnFailed(let what, let reason):
            "could not start a child process (\(what)): \(reason)"
        case .timedOut(let command, let timeout):
            "\(command) still running after \(timeout); killed"
        }
    }
}

/// A new, empty directory under the system's temporary directory.
public func makeTemporaryDirectory(prefix: String) throws -> String {
    let base = FileManager.default.temporaryDirectory.path
    var template = Array("\(base)/tandem-\(prefix)XXXXXX".utf8CString)
    guard let result = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw SystemCallError(call: "mkdtemp", errno: errno)
    }
    return String(cString: result)
}
