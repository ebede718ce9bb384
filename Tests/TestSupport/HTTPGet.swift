#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// What a plain HTTP GET got back.
public struct HTTPResponse: Sendable {
    public let status: Int
    /// Header names lowercased.
    public let headers: [String: String]
    public let body: String
}

/// `GET path` from 127.0.0.1:`port` over a socket of its own (HTTP/1.1 with
/// `Connection: close`, read to the end); each read waits at most 10 s.
public func httpGet(port: Int, path: String) throws -> HTTPResponse {
    let text = try exchange(port: port, Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8))
    guard let split = text.range(of: "\r\n\r\n") else { throw HTTPGetError(response: text) }
    let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
    let statusParts = lines.first?.split(separator: " ") ?? []
    guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw HTTPGetError(response: text) }
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return HTTPResponse(status: status, headers: headers, body: String(text[split.upperBound...]))
}

/// Sends `bytes` to 127.0.0.1:`port` and reads until the server closes (each read waits
/// at most 10 s); the answer as text. A reset after an answer counts as the end.
public func exchange(port: Int, _ bytes: [UInt8]) throws -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SystemCallError(call: "socket", errno: errno) }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw SystemCallError(call: "connect to 127.0.0.1:\(port)", errno: errno) }
    let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    guard sent == bytes.count else { throw SystemCallError(call: "send", errno: errno) }
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 {
            received += chunk[0..<n]
        } else if n == 0 || (errno == ECONNRESET && !received.isEmpty) {
            break
        } else if errno != EINTR {
            throw SystemCallError(call: "recv", errno: errno)
        }
    }
    return String(decoding: received, as: UTF8.self)
}

public struct HTTPGetError: Error, CustomStringConvertible {
    public let response: String
    public var description: String { "not an HTTP response: \(response.prefix(200))" }
}

/// The samples of a Prometheus text exposition, by series as written
/// (`tandem_events_total{kind="room",status="accepted"}`); comments skipped.
public func prometheusSamples(_ text: String) -> [String: Double] {
    var samples: [String: Double] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
        samples[String(line[..<space])] = value
    }
    return samples
}
