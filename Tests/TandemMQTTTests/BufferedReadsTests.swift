import CMosquittoReads
import Foundation
import Testing
import TestSupport
@testable import TandemMQTT

/// libmosquitto's reads go through a buffer (`CMosquittoReads`): one `read(2)` takes what
/// a socket holds and libmosquitto's byte-at-a-time header reads are served from it.
@Suite struct BufferedReadsTests {
    /// A connected pair of non-blocking stream sockets.
    private func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        return (fds[0], fds[1])
    }

    private func send(_ text: String, to fd: Int32) {
        let bytes = Array(text.utf8)
        #expect(write(fd, bytes, bytes.count) == bytes.count)
    }

    private func read(_ fd: Int32, _ count: Int) -> (Int, String) {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = tandem_mosquitto_read(fd, &buffer, count)
        return (got, got > 0 ? String(decoding: buffer[0..<got], as: UTF8.self) : "")
    }

    @Test func installedOnThisMachine() {
        _ = LibMosquitto.initialised
        #if os(Linux) && (arch(x86_64) || arch(arm64))
        #expect(LibMosquitto.buffersReads)
        #endif
    }

    @Test func smallReadsAreServedFromOneFillAndACloseDropsTheRest() throws {
        _ = LibMosquitto.initialised
        try #require(LibMosquitto.buffersReads)
        let (reader, writer) = try socketPair()
        defer { _ = close(writer) }
        send("0123456789", to: writer)
        #expect(read(reader, 1) == (1, "0"))
        #expect(tandem_mosquitto_reads_buffered(reader) == 9)
        #expect(read(reader, 2) == (2, "12"))
        #expect(read(reader, 100) == (7, "3456789"))
        #expect(tandem_mosquitto_reads_buffered(reader) == 0)
        // Nothing held and nothing sent: the socket's own answer.
        #expect(read(reader, 1).0 == -1 && errno == EAGAIN)

        send("abcdef", to: writer)
        #expect(read(reader, 1) == (1, "a"))
        #expect(tandem_mosquitto_reads_buffered(reader) == 5)
        #expect(tandem_mosquitto_close(reader) == 0)

        // The next socket given the same number reads its own bytes, not the dead one's.
        // (Usually the same number: other suites' threads may take it first.)
        let (again, peer) = try socketPair()
        defer { _ = tandem_mosquitto_close(again) }
        if again == reader { #expect(tandem_mosquitto_reads_buffered(again) == 0) }
        send("xyz", to: peer)
        #expect(read(again, 1) == (1, "x"))
        _ = close(peer)
        #expect(read(again, 10) == (2, "yz"))
        #expect(read(again, 10).0 == 0)  // end of stream once the held bytes are taken
    }

    @Test func heldOnlyServesWhatIsHeldThenLeavesTheSocketAlone() throws {
        _ = LibMosquitto.initialised
        try #require(LibMosquitto.buffersReads)
        let (reader, writer) = try socketPair()
        defer { _ = tandem_mosquitto_close(reader); _ = close(writer) }
        send("abc", to: writer)
        #expect(read(reader, 1) == (1, "a"))
        send("def", to: writer)
        tandem_mosquitto_reads_held_only(reader, 1)
        #expect(read(reader, 10) == (2, "bc"))
        #expect(read(reader, 10).0 == -1 && errno == EAGAIN)  // "def" waits in the socket
        tandem_mosquitto_reads_held_only(reader, 0)
        #expect(read(reader, 10) == (3, "def"))
    }

    @Test(.timeLimit(.minutes(1)))
    func aBurstOfMessagesArrivesWholeWithFewerSystemCallsThanReads() async throws {
        try await withBroker(.open) { broker in
            func client(_ id: String) throws -> MQTTClient {
                try MQTTClient(configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientId: id))
            }
            let a = try client("reads-a"), b = try client("reads-b")
            try await a.connect()
            try await b.connect()
            let subscription = try await a.subscribe("reads/#")
            var calls0: UInt64 = 0, syscalls0: UInt64 = 0
            tandem_mosquitto_reads_counts(&calls0, &syscalls0)
            // Sizes across a one-byte and a two-byte remaining length, and a payload larger
            // than a fill.
            let sizes = (0..<300).map { [10, 200, 3_000, 40_000][$0 % 4] }
            for (i, size) in sizes.enumerated() {
                try b.enqueue("reads/\(i)", payload: Array(repeating: UInt8(i % 251), count: size))
            }
            var seen = 0
            for try await message in subscription {
                #expect(message.topic == "reads/\(seen)")
                #expect(message.payload.count == sizes[seen] && message.payload.allSatisfy { $0 == UInt8(seen % 251) })
                seen += 1
                if seen == sizes.count { break }
            }
            #expect(seen == sizes.count)
            var calls1: UInt64 = 0, syscalls1: UInt64 = 0
            tandem_mosquitto_reads_counts(&calls1, &syscalls1)
            // Unbuffered, every call is a system call (three or more a packet), so fewer
            // shows the buffer at work. Other suites' clients count too (theirs are
            // buffered as well).
            if LibMosquitto.buffersReads {
                #expect(syscalls1 - syscalls0 < calls1 - calls0)
            }
            await a.disconnect()
            await b.disconnect()
        }
    }
}
