/// A value bound to a statement parameter, in SQLite's own storage classes.
public enum SQLiteValue: Sendable, Equatable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null

    public static func optional(_ value: Int64?) -> SQLiteValue { value.map(SQLiteValue.integer) ?? .null }
    public static func optional(_ value: Double?) -> SQLiteValue { value.map(SQLiteValue.real) ?? .null }
    public static func optional(_ value: String?) -> SQLiteValue { value.map(SQLiteValue.text) ?? .null }
    public static func optional(_ value: [UInt8]?) -> SQLiteValue { value.map(SQLiteValue.blob) ?? .null }
}

extension SQLiteValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByNilLiteral
{
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(stringLiteral value: String) { self = .text(value) }
    public init(nilLiteral: ()) { self = .null }
}
