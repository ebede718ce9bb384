/// One flight sample from the origin device (CONTRACT "Workouts"): metres, seconds per
/// km, degrees; `elapsedTime` in seconds, excluding paused time.
public struct FlightData: Sendable, Equatable {
    public let timestamp: Millis
    public let elapsedTime: Double
    public let distance: Double
    /// Seconds per kilometre; 0 when not known (standing still).
    public let pace: Double
    public let altitude: Double
    /// Degrees clockwise from north, 0-360.
    public let heading: Double
    public let gpwsStatus: GPWSStatus
    public let latitude: Double
    public let longitude: Double

    public init(
        timestamp: Millis, elapsedTime: Double, distance: Double, pace: Double, altitude: Double,
        heading: Double, gpwsStatus: GPWSStatus, latitude: Double, longitude: Double
    ) {
        self.timestamp = timestamp
        self.elapsedTime = elapsedTime
        self.distance = distance
        self.pace = pace
        self.altitude = altitude
        self.heading = heading
        self.gpwsStatus = gpwsStatus
        self.latitude = latitude
        self.longitude = longitude
    }

    /// The receipt id of a rejected flight sample.
    public static func receiptId(timestamp: Millis) -> String { "flight:\(timestamp)" }
    /// Where a flight sample's receipt id is read from.
    public static let receiptIdSource = ReceiptIdSource.timestamp(prefix: "flight")

    /// Reads a FlightData payload: finite numbers, latitude in [-90, 90], longitude in
    /// [-180, 180], heading in [0, 360], no negative distance, elapsedTime or pace. The
    /// failure's id is `flight:<timestamp>` when the timestamp could be read, else "".
    public static func decode(_ bytes: some Collection<UInt8>) throws(DecodeFailure) -> FlightData {
        try PayloadReader.decode(bytes, idSource: receiptIdSource) {
            (reader) throws(Rejection) in try FlightData(reader: reader)
        }
    }

    init(reader: PayloadReader) throws(Rejection) {
        timestamp = try reader.int64("timestamp")
        elapsedTime = try reader.nonNegative("elapsedTime")
        distance = try reader.nonNegative("distance")
        pace = try reader.nonNegative("pace")
        altitude = try reader.double("altitude")
        heading = try reader.double("heading", in: 0...360)
        gpwsStatus = try reader.oneOf("gpwsStatus", GPWSStatus.self)
        latitude = try reader.double("latitude", in: -90...90)
        longitude = try reader.double("longitude", in: -180...180)
    }

    /// Reads a FlightData object nested in a snapshot.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("flight must be an object, not \(json.typeName)") }
        try self.init(reader: PayloadReader(object: json))
    }

    public var json: JSON {
        .obj([
            "timestamp": .int(timestamp),
            "elapsedTime": .double(elapsedTime),
            "distance": .double(distance),
            "pace": .double(pace),
            "altitude": .double(altitude),
            "heading": .double(heading),
            "gpwsStatus": .string(gpwsStatus.rawValue),
            "latitude": .double(latitude),
            "longitude": .double(longitude),
        ])
    }
}

extension PayloadReader {
    /// A finite number that is not negative.
    func nonNegative(_ key: String) throws(Rejection) -> Double {
        let value = try double(key)
        guard value >= 0 else { throw .invalid("\(key) must not be negative") }
        return value
    }

    /// A finite number within `range`.
    func double(_ key: String, in range: ClosedRange<Double>) throws(Rejection) -> Double {
        let value = try double(key)
        guard range.contains(value) else {
            throw .invalid("\(key) must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return value
    }
}
