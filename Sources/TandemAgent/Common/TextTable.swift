/// A plain-text table: a header row, a rule, and left-aligned columns padded to their
/// widest cell (widths counted in Characters, so non-ASCII text lines up as well as a
/// terminal allows). A column whose header is empty has no rule under it.
public struct TextTable: Sendable, Equatable {
    public var headers: [String]
    public var rows: [[String]]

    public init(headers: [String], rows: [[String]] = []) {
        self.headers = headers
        self.rows = rows
    }

    public func rendered() -> String {
        let columns = headers.count
        var widths = headers.map(\.count)
        for row in rows {
            for (i, cell) in row.prefix(columns).enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            var parts: [String] = []
            for i in 0..<columns {
                let cell = i < cells.count ? cells[i] : ""
                parts.append(i == columns - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count))
            }
            var text = parts.joined(separator: "  ")
            while text.last == " " { text.removeLast() }
            return text
        }
        // A column without a heading (a "(pending)" marker) gets no rule under it either.
        var rule = zip(headers, widths)
            .map { String(repeating: $0.isEmpty ? " " : "-", count: $1) }
            .joined(separator: "  ")
        while rule.last == " " { rule.removeLast() }
        var out = [line(headers), rule]
        out += rows.map(line)
        return out.joined(separator: "\n")
    }
}
