/// One health sample from the watch (CONTRACT "Workouts"): beats per minute, steps per
/// minute, kilocalories so far.
public struct HealthData: Sendable, Equatable {
    public let timestamp: Millis
    public let heartRate: Double
    public let cadence: Double
    public let activeEnergy: Double

    public init(timestamp: Millis, heartRate: Double, cadence: Double, activeEnergy: Double) {
        self.timestamp = timestamp
        self.heartRate = heartRate
        self.cadence = cadence
        self.activeEnergy = activeEnergy
    }

    /// The receipt id of a rejected health sample.
    public static func receiptId(timestamp: Millis) -> String { "health:\(timestamp)" }
    /// Where a health sample's receipt id is read from.
    public static let receiptIdSource = ReceiptIdSource.timestamp(prefix: "health")

    /// Reads a HealthData payload: finite numbers, none negative. The failure's id is
    /// `health:<timestamp>` when the timestamp could be read, else "".
    public static func decode(_ bytes: some Collection<UInt8>) throws(DecodeFailure) -> HealthData {
        try PayloadReader.decode(bytes, idSource: receiptIdSource) {
            (reader) throws(Rejection) in try HealthData(reader: reader)
        }
    }

    init(reader: PayloadReader) throws(Rejection) {
        timestamp = try reader.int64("timestamp")
        heartRate = try reader.nonNegative("heartRate")
        cadence = try reader.nonNegative("cadence")
        activeEnergy = try reader.nonNegative("activeEnergy")
    }

    /// Reads a HealthData object nested in a snapshot.
    public init(json: JSON) throws(Rejection) {
        guard case .object = json else { throw .invalid("health must be an object, not \(json.typeName)") }
        try self.init(reader: PayloadReader(object: json))
    }

    public var json: JSON {
        .obj([
            "timestamp": .int(timestamp),
            "heartRate": .double(heartRate),
            "cadence": .double(cadence),
            "activeEnergy": .double(activeEnergy),
        ])
    }
}
