/// Why an inbound payload could not be taken: the rejection to send, and the id to send
/// it under (the payload's own id when a valid one could be read, else "").
///
/// The one convention of the package's decoders: they throw a typed error, this one for
/// a client's payload (whose id the receipt needs), `Rejection` for what the coordinator
/// wrote (snapshots and changes a client reads).
public struct DecodeFailure: Error, Sendable, Equatable {
    public var id: String
    public var rejection: Rejection

    public init(id: String, _ rejection: Rejection) {
        self.id = id
        self.rejection = rejection
    }

    /// The failure `body` throws, nil when it decodes (tests, the fuzz harness; a
    /// closure's thrown type is not inferred, so `body` may throw anything and only a
    /// DecodeFailure counts).
    public static func of<T>(_ body: () throws -> T) -> DecodeFailure? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? DecodeFailure
        }
    }
}

/// Reads the fields of one inbound JSON object with the contract's checks, each failure a
/// `Rejection` whose message names the field. Decoders of every domain are built on it.
public struct PayloadReader: Sendable {
    public let object: JSON
    /// The receipt id (a valid eventId or commandId, `flight:<timestamp>`) if one could
    /// be read, else "".
    public let id: String

    /// Parses `bytes`: size limit, JSON syntax, a top-level object. `idSource` says where
    /// the receipt id is read from, even when another part of the payload is wrong (and
    /// even when it is not JSON at all: see ``FieldSalvage``).
    public static func read(_ bytes: some Collection<UInt8>, idSource: ReceiptIdSource?) throws(DecodeFailure) -> PayloadReader {
        let json: JSON
        do {
            json = try JSON.parse(bytes)
        } catch {
            let id = idSource?.salvage(from: bytes) ?? ""
            if bytes.count > WireLimits.maxPayloadBytes {
                throw DecodeFailure(id: id, Rejection(.payloadTooLarge, "payload is \(bytes.count) bytes; the limit is \(WireLimits.maxPayloadBytes)"))
            }
            throw DecodeFailure(id: id, .invalid(error.description))
        }
        let id = idSource?.id(in: json) ?? ""
        if bytes.count > WireLimits.maxPayloadBytes {
            throw DecodeFailure(id: id, Rejection(.payloadTooLarge, "payload is \(bytes.count) bytes; the limit is \(WireLimits.maxPayloadBytes)"))
        }
        guard case .object = json else {
            throw DecodeFailure(id: id, .invalid("payload must be a JSON object, not \(json.typeName)"))
        }
        return PayloadReader(object: json, id: id)
    }

    /// Parses `bytes` and builds a value from its fields: every decoder's shape. A
    /// failure carries the receipt id read as `idSource` says, else "".
    public static func decode<T>(
        _ bytes: some Collection<UInt8>, idSource: ReceiptIdSource?,
        _ make: (PayloadReader) throws(Rejection) -> T
    ) throws(DecodeFailure) -> T {
        let reader = try read(bytes, idSource: idSource)
        do throws(Rejection) {
            return try make(reader)
        } catch {
            throw DecodeFailure(id: reader.id, error)
        }
    }

    public init(object: JSON, id: String = "") {
        self.object = object
        self.id = id
    }

    public func has(_ key: String) -> Bool {
        guard let v = object[key] else { return false }
        return !v.isNull
    }

    public func identifier(_ key: String) throws(Rejection) -> String {
        let s = try string(key)
        guard Identifier.isValid(s) else {
            throw .invalid("\(key) must be 1-\(Identifier.maxLength) characters of A-Z a-z 0-9 _ . -")
        }
        return s
    }

    public func string(_ key: String) throws(Rejection) -> String {
        guard let value = object[key], !value.isNull else { throw .invalid("\(key) is required") }
        guard let s = value.stringValue else { throw .invalid("\(key) must be a string, not \(value.typeName)") }
        return s
    }

    public func optionalString(_ key: String) throws(Rejection) -> String? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let s = value.stringValue else { throw .invalid("\(key) must be a string, not \(value.typeName)") }
        return s
    }

    /// An integer (milliseconds, counts). Fractions and out-of-range values are refused.
    public func int64(_ key: String) throws(Rejection) -> Int64 {
        guard let value = object[key], !value.isNull else { throw .invalid("\(key) is required") }
        guard let i = value.int64Value else { throw .invalid("\(key) must be an integer, not \(value.typeName == "number" ? "a fraction" : value.typeName)") }
        return i
    }

    /// A finite number.
    public func double(_ key: String) throws(Rejection) -> Double {
        guard let value = object[key], !value.isNull else { throw .invalid("\(key) is required") }
        guard let d = value.doubleValue, d.isFinite else { throw .invalid("\(key) must be a finite number, not \(value.typeName)") }
        return d
    }

    public func optionalDouble(_ key: String) throws(Rejection) -> Double? {
        guard has(key) else { return nil }
        return try double(key)
    }

    /// A string that must be one of an enum's raw values.
    public func oneOf<E: RawRepresentable & CaseIterable>(_ key: String, _: E.Type) throws(Rejection) -> E where E.RawValue == String {
        let s = try string(key)
        guard let e = E(rawValue: s) else {
            throw .invalid("\(key) must be one of \(E.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return e
    }

    public func optionalOneOf<E: RawRepresentable & CaseIterable>(_ key: String, _ type: E.Type) throws(Rejection) -> E? where E.RawValue == String {
        guard has(key) else { return nil }
        return try oneOf(key, type)
    }

    /// A nested object, read with its own reader.
    public func nested(_ key: String) throws(Rejection) -> PayloadReader {
        guard let value = object[key], !value.isNull else { throw .invalid("\(key) is required") }
        guard case .object = value else { throw .invalid("\(key) must be an object, not \(value.typeName)") }
        return PayloadReader(object: value)
    }
}

/// Where a payload's receipt id comes from.
public enum ReceiptIdSource: Sendable, Equatable {
    /// A field holding an identifier (`eventId`, `commandId`, `requestId`).
    case field(String)
    /// Telemetry: `<prefix>:<timestamp>` (`flight:1763740000123`).
    case timestamp(prefix: String)

    /// The id in a parsed payload, "" when there is none to read.
    public func id(in json: JSON) -> String {
        switch self {
        case .field(let key):
            guard let s = json[key]?.stringValue, Identifier.isValid(s) else { return "" }
            return s
        case .timestamp(let prefix):
            guard let t = json["timestamp"]?.int64Value else { return "" }
            return "\(prefix):\(t)"
        }
    }

    /// The id in a payload that is not valid JSON, "" when it cannot be read.
    public func salvage(from bytes: some Collection<UInt8>) -> String {
        switch self {
        case .field(let key):
            guard let s = FieldSalvage.string(bytes, key: key), Identifier.isValid(s) else { return "" }
            return s
        case .timestamp(let prefix):
            guard let t = FieldSalvage.int64(bytes, key: "timestamp") else { return "" }
            return "\(prefix):\(t)"
        }
    }

    /// The id of any payload: parsed when it is JSON, salvaged when it is not.
    public func id(of bytes: some Collection<UInt8>) -> String {
        if let json = try? JSON.parse(bytes) { return id(in: json) }
        return salvage(from: bytes)
    }
}
