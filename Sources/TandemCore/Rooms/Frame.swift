/// Where a sticker sits on the board: finite numbers, a positive size.
public struct Frame: Sendable, Equatable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    /// `{"x","y","width","height"}`, in the contract's order.
    public func json() -> JSON {
        .obj(["x": .double(x), "y": .double(y), "width": .double(width), "height": .double(height)])
    }

    /// Reads a frame with the contract's checks. Messages name the field as `frame.<name>`.
    /// `strict: false` (reading the coordinator's own output) skips the size check.
    public init(reader: PayloadReader, field: String = "frame", strict: Bool = true) throws(Rejection) {
        do throws(Rejection) {
            x = try reader.double("x")
            y = try reader.double("y")
            width = try reader.double("width")
            height = try reader.double("height")
        } catch {
            throw .invalid("\(field).\(error.message)")
        }
        if strict {
            guard width > 0 else { throw .invalid("\(field).width must be greater than 0") }
            guard height > 0 else { throw .invalid("\(field).height must be greater than 0") }
        }
    }
}
