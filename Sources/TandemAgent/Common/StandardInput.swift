import Foundation
import Synchronization

/// The lines of stdin as an async sequence, read on a thread of their own (a blocking
/// read must not hold a cooperative thread). Ends at EOF.
public enum StandardInput {
    public static func lines() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .unbounded)
        let thread = Thread {
            while let line = readLine(strippingNewline: true) {
                continuation.yield(line)
            }
            continuation.finish()
        }
        thread.name = "stdin"
        thread.start()
        return stream
    }
}

/// SIGINT (Ctrl-C) and SIGTERM as an async sequence instead of the default of dying, so
/// an agent can finish cleanly (send stop, publish offline).
public final class SignalWatcher: Sendable {
    public let signals: AsyncStream<Int32>
    /// The dispatch sources, kept alive as long as the watcher (a Mutex because they are
    /// not Sendable; nothing touches them after init but deinit).
    private let sources: Mutex<[any DispatchSourceSignal]>

    public init(_ numbers: [Int32] = [SIGINT, SIGTERM]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        signals = stream
        sources = Mutex(numbers.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        })
    }

    deinit {
        sources.withLock { $0.forEach { $0.cancel() } }
    }
}
