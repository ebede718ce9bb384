#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A PostgreSQL connection URL as `--database` takes it:
/// `postgres://user:password@host:port/dbname?sslmode=...` (also `postgresql://`).
///
/// Spelled as libpq spells it, with libpq's defaults: port 5432, the database named
/// like the user, `sslmode=prefer`. User, password and database name may be
/// percent-encoded (a password with `@` or `/` in it). ``description`` never shows the
/// password, so the URL can go into logs and reports.
public struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var sslMode: SSLMode
    /// `sslrootcert`: the CA file that `verify-ca` and `verify-full` check the server
    /// against (the system's trust store when absent).
    public var sslRootCert: String?

    /// libpq's `sslmode` values.
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    /// Whether `text` names a PostgreSQL database rather than a SQLite file.
    public static func isPostgres(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Parses a `postgres://` or `postgresql://` URL; throws with the reason when it is
    /// malformed (the message never repeats the password).
    public init(parsing text: String, defaultUser: String = "postgres") throws(Invalid) {
        guard let schemeEnd = text.range(of: "://"), Self.isPostgres(text) else {
            throw Invalid(reason: "a PostgreSQL URL starts with postgres:// or postgresql://")
        }
        var rest = Substring(text[schemeEnd.upperBound...])
        var query: Substring = ""
        if let q = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: q)...]
            rest = rest[..<q]
        }
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        // userinfo@host:port; the last @ separates them (a raw @ in a password is common).
        var userInfo: Substring?
        if let at = rest.lastIndex(of: "@") {
            userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
        }
        var user = defaultUser
        var password: String?
        if let userInfo {
            let parts = userInfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            user = try Self.decode(parts[0], what: "user name")
            if parts.count == 2 { password = try Self.decode(parts[1], what: "password") }
            guard !user.isEmpty else { throw Invalid(reason: "the PostgreSQL URL has an empty user name") }
        }
        var host = "localhost"
        var port = 5432
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw Invalid(reason: "unclosed [ in the PostgreSQL URL's host") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            rest = rest[rest.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { throw Invalid(reason: "unexpected text after the host in the PostgreSQL URL") }
                port = try Self.port(rest.dropFirst())
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            port = try Self.port(rest[rest.index(after: colon)...])
        } else if !rest.isEmpty {
            host = String(rest)
        }
        guard !host.isEmpty else { throw Invalid(reason: "the PostgreSQL URL names no host") }
        var database = path.isEmpty ? user : try Self.decode(path, what: "database name")
        if database.isEmpty { database = user }
        guard !database.contains("/") else { throw Invalid(reason: "the PostgreSQL URL's database name contains a /") }

        var sslMode = SSLMode.prefer
        var sslRootCert: String?
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(kv[0])
            let value = kv.count == 2 ? try Self.decode(kv[1], what: key) : ""
            switch key {
            case "sslmode":
                guard let mode = SSLMode(rawValue: value) else {
                    throw Invalid(reason: "sslmode=\(value) is not one of \(SSLMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                sslMode = mode
            case "sslrootcert":
                sslRootCert = value
            case "application_name", "connect_timeout":
                break  // accepted and ignored: the coordinator sets its own
            default:
                throw Invalid(reason: "the PostgreSQL URL parameter \(key) is not supported (sslmode and sslrootcert are)")
            }
        }
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.sslMode = sslMode
        self.sslRootCert = sslRootCert
    }

    public var description: String {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        var text = "postgres://\(user)@\(hostPart):\(port)/\(database)"
        if sslMode != .prefer { text += "?sslmode=\(sslMode.rawValue)" }
        return text
    }

    static func port(_ text: Substring) throws(Invalid) -> Int {
        guard let port = Int(text), (1...65535).contains(port) else {
            throw Invalid(reason: "the PostgreSQL URL's port \(text) is not a number from 1 to 65535")
        }
        return port
    }

    /// Percent-decoding (`%40` is `@`); `what` names the part in the error.
    static func decode(_ text: Substring, what: String) throws(Invalid) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw Invalid(reason: "bad percent-encoding in the PostgreSQL URL's \(what)")
            }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw Invalid(reason: "the PostgreSQL URL's \(what) is not UTF-8 once decoded")
        }
        return decoded
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension PostgresURL {
    /// The password as libpq would find it when the URL has none: `PGPASSWORD`, else the
    /// first matching line of the password file (`PGPASSFILE`, else `~/.pgpass`), whose
    /// lines read `host:port:database:user:password` with `*` for any value and `\:` for
    /// a colon. So a deployment keeps the password in a secret file, never in the URL
    /// or the environment's `TANDEM_DATABASE`.
    public func resolvingPassword(environment: [String: String]) -> PostgresURL {
        guard password == nil else { return self }
        var resolved = self
        if let value = environment["PGPASSWORD"], !value.isEmpty {
            resolved.password = value
            return resolved
        }
        let path = environment["PGPASSFILE"] ?? environment["HOME"].map { $0 + "/.pgpass" }
        guard let path, let text = Self.readFile(path) else { return self }
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) where !line.hasPrefix("#") {
            let fields = Self.passFields(line)
            guard fields.count == 5 else { continue }
            let wanted = [host, String(port), database, user]
            if zip(fields.prefix(4), wanted).allSatisfy({ $0 == "*" || $0 == $1 }) {
                resolved.password = fields[4]
                return resolved
            }
        }
        return self
    }

    /// Splits a `.pgpass` line on unescaped colons, unescaping `\:` and `\\`.
    static func passFields(_ line: Substring) -> [String] {
        var fields: [String] = []
        var current = ""
        var escaped = false
        for c in line {
            if escaped {
                current.append(c)
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == ":" && fields.count < 4 {
                fields.append(current)
                current = ""
            } else {
                current.append(c)
            }
        }
        fields.append(current)
        return fields
    }

    static func readFile(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
