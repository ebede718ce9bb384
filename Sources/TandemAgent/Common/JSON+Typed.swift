import TandemCore

extension JSON {
    /// The same object with `type` first: the shape of every `--json` line.
    public func typed(_ type: String) -> JSON {
        guard case .object(let members) = self else { return .obj(["type": .string(type), "value": self]) }
        return .object([Member("type", .string(type))] + members.filter { $0.key != "type" })
    }
}
