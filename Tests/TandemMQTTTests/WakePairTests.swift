import CMosquitto
import Foundation
import Testing
import TestSupport
@testable import TandemMQTT

/// libmosquitto 2.0's wake-up socket pair, which only `mosquitto_loop()` reads, is closed
/// as soon as a client is made (`tandem_mosquitto_close_wake_pair`): a client holds its
/// socket (and, without a connector, its eventfd), not two descriptors more.
@Suite(.serialized) struct WakePairTests {
    static var isLibmosquitto20: Bool {
        var major: Int32 = 0, minor: Int32 = 0, revision: Int32 = 0
        mosquitto_lib_version(&major, &minor, &revision)
        return major == 2 && minor == 0
    }

    @Test(.enabled(if: isLibmosquitto20, "the layout it checks is 2.0's"))
    func thePairIsFoundAndClosedOnThisLibmosquitto() throws {
        _ = LibMosquitto.initialised
        let handle = try #require(mosquitto_new(nil, true, nil))
        defer { mosquitto_destroy(handle) }
        // What the helper looks at: the socket (none yet) and the pair, two Unix sockets.
        let fields = UnsafeRawPointer(handle).assumingMemoryBound(to: Int32.self)
        #expect(fields[0] == -1)
        for fd in [fields[1], fields[2]] {
            var type: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            #expect(getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == Int32(SOCK_STREAM.rawValue))
        }
        #expect(tandem_mosquitto_close_wake_pair(handle) == 1)
        #expect(fields[1] == -1 && fields[2] == -1)
        // A second look finds nothing to close; mosquitto_destroy (deferred) closes nothing twice.
        #expect(tandem_mosquitto_close_wake_pair(handle) == 0)
    }

    @Test func clientsWithoutThePairStillTalk() async throws {
        try await withBroker(.open) { broker in
            func client(_ id: String) throws -> MQTTClient {
                try MQTTClient(configuration: MQTTConfiguration(host: broker.host, port: broker.port, clientId: id))
            }
            let a = try client("a"), b = try client("b")
            #expect(a.core.closedWakePair == Self.isLibmosquitto20 && b.core.closedWakePair == Self.isLibmosquitto20)
            try await a.connect()
            try await b.connect()
            let subscription = try await a.subscribe("pair/#")
            // Queued from a thread that is not the client's (where the pair was written).
            for i in 0..<50 { try b.enqueue("pair/\(i)", payload: Array("\(i)".utf8)) }
            var seen = 0
            for try await _ in subscription {
                seen += 1
                if seen == 50 { break }
            }
            #expect(seen == 50)
            await a.disconnect()
            await b.disconnect()
        }
    }
}
