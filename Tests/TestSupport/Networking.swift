#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call, with the system's own message.
public struct SystemCallError: Error, CustomStringConvertible {
    public let call: String
    public let errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// A TCP port on 127.0.0.1 that nobody was listening on a moment ago: binds port 0,
/// reads the port the kernel chose, closes. (Another process could take it before
/// the caller does; for a port that must stay unanswered, use ``RefusingTCPPort``.)
public func freeTCPPort() throws -> Int {
    let (fd, port) = try boundLoopbackSocket()
    close(fd)
    return port
}

/// A TCP port on 127.0.0.1 that refuses connections for as long as this lives: bound,
/// never listening, so nothing else can take it. A port from ``freeTCPPort()`` can be
/// taken meanwhile by a broker that a test running at the same time starts; a test
/// that needs "nobody is there" then meets that broker instead. Keep it alive for the
/// test (`withExtendedLifetime`).
public final class RefusingTCPPort: Sendable {
    public let port: Int
    private let fd: Int32

    public init() throws {
        (fd, port) = try boundLoopbackSocket()
    }

    deinit { close(fd) }
}

/// A TCP socket bound to 127.0.0.1 on a port the kernel chose, and that port.
private func boundLoopbackSocket() throws -> (Int32, Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SystemCallError(call: "socket", errno: errno) }
    var address = loopbackAddress(port: 0)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard bound == 0 else {
        let error = SystemCallError(call: "bind", errno: errno)
        close(fd)
        throw error
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            getsockname(fd, $0, &length)
        }
    }
    guard named == 0 else {
        let error = SystemCallError(call: "getsockname", errno: errno)
        close(fd)
        throw error
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// Whether something accepts TCP connections on 127.0.0.1:`port` (connects, closes).
public func acceptsTCPConnections(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = loopbackAddress(port: port)
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return result == 0
}

private func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    #if canImport(Darwin)
    address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
    #endif
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return address
}
