/// Receipts on the wire: written by the coordinator, read (leniently) by clients.
extension Receipt {
    /// The wire form. `code` and `version` are always present (null when absent);
    /// `original` only on a duplicate whose first copy's outcome is known.
    public var json: JSON {
        var members: [JSON.Member] = [
            .init("id", .string(id)),
            .init("kind", .string(kind.rawValue)),
            .init("status", .string(status.rawValue)),
            .init("code", JSON(code?.rawValue)),
            .init("message", .string(message)),
            .init("version", JSON(version)),
        ]
        if let original { members.append(.init("original", original.json)) }
        return .object(members)
    }

    /// Reads a receipt leniently, as a client: `id`, `kind` and `status` are required;
    /// an unknown `code` reads as nil (the message still says what happened), a missing
    /// `message` as "", a missing or null `version` as nil.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("a receipt must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        let code = (try? reader.optionalString("code")).flatMap { $0.flatMap(ReceiptCode.init(rawValue:)) }
        self.init(
            id: try reader.string("id"),
            kind: try Self.raw(reader, "kind", Kind.init(rawValue:), "room, dm, workout"),
            status: try Self.raw(reader, "status", Status.init(rawValue:), "accepted, rejected, duplicate"),
            code: code,
            message: (try? reader.optionalString("message")).flatMap { $0 } ?? "",
            version: reader.has("version") ? (try? reader.int64("version")) : nil
        )
        if let nested = json["original"], case .object = nested {
            original = try? Original(json: nested)
        }
    }

    private static func raw<T>(_ reader: PayloadReader, _ key: String, _ make: (String) -> T?, _ allowed: String) throws(Rejection) -> T {
        guard let value = make(try reader.string(key)) else { throw .invalid("\(key) must be one of \(allowed)") }
        return value
    }

    public static func decode(_ bytes: some Collection<UInt8>) throws(Rejection) -> Receipt {
        let json: JSON
        do throws(JSONParseError) {
            json = try JSON.parse(bytes)
        } catch {
            throw .invalid(error.description)
        }
        return try Receipt(json: json)
    }

    /// What the client should act on: a duplicate that carries its first copy's outcome
    /// reads as that outcome (a resend after a lost receipt learns whether it was
    /// accepted or rejected); anything else as it is.
    public var resolved: Receipt {
        guard status == .duplicate, let original else { return self }
        var out = Receipt(id: id, kind: kind, status: original.status, code: original.code, message: message, version: original.version)
        out.original = original
        return out
    }
}

extension Receipt.Original {
    public var json: JSON {
        .obj(["status": .string(status.rawValue), "code": JSON(code?.rawValue), "version": JSON(version)])
    }

    public init(json: JSON) throws(Rejection) {
        let reader = PayloadReader(object: json)
        let statusText = try reader.string("status")
        guard let status = Receipt.Status(rawValue: statusText), status != .duplicate else {
            throw .invalid("original.status must be accepted or rejected")
        }
        self.init(
            status: status,
            code: (try? reader.optionalString("code")).flatMap { $0.flatMap(ReceiptCode.init(rawValue:)) },
            version: reader.has("version") ? (try? reader.int64("version")) : nil)
    }
}
