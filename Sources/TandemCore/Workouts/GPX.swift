/// A minimal GPX reader: the track points of a file, in file order.
///
/// Reads `<trkpt lat=".." lon=".."><ele>..</ele><time>..</time></trkpt>` (attributes in
/// either order and either quote style; `ele` optional, 0 without). `time` is ISO 8601
/// in UTC, `YYYY-MM-DDTHH:MM:SS(.fraction)?Z`, or with a `±HH:MM` offset. Everything
/// else in the file is skipped. No Foundation.
public enum GPX {
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The file has no `<trkpt>` at all.
        case noTrackPoints
        /// Track point `index` (0-based, in file order) is unreadable.
        case invalidTrackPoint(index: Int, reason: String)

        public var description: String {
            switch self {
            case .noTrackPoints:
                "the GPX file has no track points (<trkpt lat=\"..\" lon=\"..\"> with a <time>)"
            case .invalidTrackPoint(let index, let reason):
                "GPX track point \(index + 1): \(reason)"
            }
        }
    }

    public static func parse(_ text: String) throws(ParseError) -> [GPSFix] {
        try parse(Array(text.utf8))
    }

    public static func parse(_ bytes: [UInt8]) throws(ParseError) -> [GPSFix] {
        var fixes: [GPSFix] = []
        var cursor = 0
        while let start = find(Array("<trkpt".utf8), in: bytes, from: cursor) {
            let afterName = start + 6
            // `<trkpts>` or `<trkptx` is another element.
            guard afterName < bytes.count, [0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ">"), UInt8(ascii: "/")].contains(bytes[afterName]) else {
                cursor = afterName
                continue
            }
            let index = fixes.count
            guard let tagEnd = bytes[afterName...].firstIndex(of: UInt8(ascii: ">")) else {
                throw .invalidTrackPoint(index: index, reason: "unterminated <trkpt> tag")
            }
            let attributes = Array(bytes[afterName..<tagEnd])
            let selfClosing = attributes.last == UInt8(ascii: "/")
            var body: [UInt8] = []
            if selfClosing {
                cursor = tagEnd + 1
            } else {
                guard let close = find(Array("</trkpt>".utf8), in: bytes, from: tagEnd + 1) else {
                    throw .invalidTrackPoint(index: index, reason: "missing </trkpt>")
                }
                body = Array(bytes[(tagEnd + 1)..<close])
                cursor = close + 8
            }
            fixes.append(try trackPoint(index: index, attributes: attributes, body: body))
        }
        guard !fixes.isEmpty else { throw .noTrackPoints }
        return fixes
    }

    /// Milliseconds since the Unix epoch of an ISO 8601 time
    /// `YYYY-MM-DDTHH:MM:SS(.fraction)?(Z|±HH:MM)`; nil when malformed.
    public static func parseTime(_ text: String) -> Millis? {
        let b = Array(text.utf8)
        func digits(_ at: Int, _ count: Int) -> Int64? {
            guard at + count <= b.count else { return nil }
            var v: Int64 = 0
            for i in at..<(at + count) {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                v = v * 10 + Int64(b[i] - 0x30)
            }
            return v
        }
        guard b.count >= 20,
              let year = digits(0, 4), b[4] == UInt8(ascii: "-"),
              let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
              let day = digits(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
              let hour = digits(11, 2), b[13] == UInt8(ascii: ":"),
              let minute = digits(14, 2), b[16] == UInt8(ascii: ":"),
              let second = digits(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 61
        else { return nil }
        var i = 19
        var millis: Int64 = 0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale: Int64 = 100
            let fractionStart = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                millis += Int64(b[i] - 0x30) * scale
                scale /= 10
                i += 1
            }
            guard i > fractionStart else { return nil }
        }
        var offsetMinutes: Int64 = 0
        guard i < b.count else { return nil }
        switch b[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard let oh = digits(i + 1, 2), i + 3 < b.count, b[i + 3] == UInt8(ascii: ":"), let om = digits(i + 4, 2),
                  oh < 24, om < 60
            else { return nil }
            offsetMinutes = (oh * 60 + om) * (b[i] == UInt8(ascii: "-") ? -1 : 1)
            i += 6
        default:
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offsetMinutes * 60
        return seconds * 1_000 + millis
    }

    // MARK: Helpers

    private static func trackPoint(index: Int, attributes: [UInt8], body: [UInt8]) throws(ParseError) -> GPSFix {
        guard let latText = attribute("lat", in: attributes), let lat = Double(latText), (-90...90).contains(lat) else {
            throw .invalidTrackPoint(index: index, reason: "lat must be a number in [-90, 90]")
        }
        guard let lonText = attribute("lon", in: attributes), let lon = Double(lonText), (-180...180).contains(lon) else {
            throw .invalidTrackPoint(index: index, reason: "lon must be a number in [-180, 180]")
        }
        var altitude = 0.0
        if let eleText = element("ele", in: body) {
            guard let ele = Double(eleText), ele.isFinite else {
                throw .invalidTrackPoint(index: index, reason: "ele must be a number, not \"\(eleText)\"")
            }
            altitude = ele
        }
        guard let timeText = element("time", in: body) else {
            throw .invalidTrackPoint(index: index, reason: "missing <time>")
        }
        guard let time = parseTime(timeText) else {
            throw .invalidTrackPoint(index: index, reason: "time must be YYYY-MM-DDTHH:MM:SS(.sss)Z, not \"\(timeText)\"")
        }
        return GPSFix(time: time, latitude: lat, longitude: lon, altitude: altitude)
    }

    /// The value of `name="..."` or `name='...'` among a tag's attributes.
    private static func attribute(_ name: String, in attributes: [UInt8]) -> String? {
        let key = Array(name.utf8)
        var i = 0
        while i + key.count < attributes.count {
            let precededBySpace = i > 0 && [0x20, 0x09, 0x0A, 0x0D].contains(attributes[i - 1])
            if precededBySpace, Array(attributes[i..<(i + key.count)]) == key {
                var j = i + key.count
                while j < attributes.count, [0x20, 0x09, 0x0A, 0x0D].contains(attributes[j]) { j += 1 }
                if j < attributes.count, attributes[j] == UInt8(ascii: "=") {
                    j += 1
                    while j < attributes.count, [0x20, 0x09, 0x0A, 0x0D].contains(attributes[j]) { j += 1 }
                    guard j < attributes.count else { return nil }
                    let quote = attributes[j]
                    guard quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else { return nil }
                    guard let end = attributes[(j + 1)...].firstIndex(of: quote) else { return nil }
                    return trimmed(attributes[(j + 1)..<end])
                }
            }
            i += 1
        }
        return nil
    }

    /// The text of the first `<name>...</name>` in `body`.
    private static func element(_ name: String, in body: [UInt8]) -> String? {
        guard let open = find(Array("<\(name)>".utf8), in: body, from: 0) else { return nil }
        let start = open + name.utf8.count + 2
        guard let close = find(Array("</\(name)>".utf8), in: body, from: start) else { return nil }
        return trimmed(body[start..<close])
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        let isSpace: (UInt8) -> Bool = { [0x20, 0x09, 0x0A, 0x0D].contains($0) }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        var i = start
        let first = needle[0]
        while i <= haystack.count - needle.count {
            if haystack[i] == first, haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
