/// One sticker of a room, as snapshots and changes show it.
public struct Sticker: Sendable, Equatable {
    public var id: String
    public var image: String
    public var frame: Frame
    /// The user holding the lock, nil when nobody does.
    public var owner: String?
    public var createdBy: String
    public var updatedBy: String
    /// The timestamp of the event that last changed it (the coordinator's clock for an expiry).
    public var updatedAt: Millis

    public init(id: String, image: String, frame: Frame, owner: String?, createdBy: String, updatedBy: String, updatedAt: Millis) {
        self.id = id
        self.image = image
        self.frame = frame
        self.owner = owner
        self.createdBy = createdBy
        self.updatedBy = updatedBy
        self.updatedAt = updatedAt
    }

    /// `{"id","image","frame","owner","createdBy","updatedBy","updatedAt"}`; `owner` is null
    /// when nobody holds the lock.
    public func json() -> JSON {
        .obj([
            "id": .string(id),
            "image": .string(image),
            "frame": frame.json(),
            "owner": JSON(owner),
            "createdBy": .string(createdBy),
            "updatedBy": .string(updatedBy),
            "updatedAt": .int(updatedAt),
        ])
    }

    /// Reads a sticker the coordinator wrote. Lenient: only `id`, `image` and `frame` are
    /// required; missing authors read as "", a missing `updatedAt` as 0.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("sticker must be an object, not \(json.typeName)") }
        let reader = PayloadReader(object: json)
        id = try reader.string("id")
        image = try reader.string("image")
        frame = try Frame(reader: reader.nested("frame"), strict: false)
        owner = try reader.optionalString("owner")
        createdBy = try reader.optionalString("createdBy") ?? ""
        updatedBy = try reader.optionalString("updatedBy") ?? ""
        updatedAt = reader.has("updatedAt") ? try reader.int64("updatedAt") : 0
    }
}
