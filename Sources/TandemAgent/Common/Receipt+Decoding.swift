import TandemCore

extension Receipt {
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

    /// The wire form (the `{"type":"receipt",...}` line of `--json` adds its type).
    public var json: JSON {
        .obj([
            "id": .string(id),
            "kind": .string(kind.rawValue),
            "status": .string(status.rawValue),
            "code": code.map { .string($0.rawValue) } ?? .null,
            "message": .string(message),
            "version": JSON(version),
        ])
    }

    /// Whether the coordinator has taken the event or command (a duplicate was taken
    /// before).
    public var isAcknowledgement: Bool { status != .rejected }
}

extension JSON {
    /// The same object with `type` first: the shape of every `--json` line.
    public func typed(_ type: String) -> JSON {
        guard case .object(let members) = self else { return .obj(["type": .string(type), "value": self]) }
        return .object([Member("type", .string(type))] + members.filter { $0.key != "type" })
    }
}
