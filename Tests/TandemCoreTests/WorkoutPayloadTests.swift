import Testing
@testable import TandemCore

@Suite struct WorkoutPayloadTests {
    @Test func decodesAControl() throws {
        let control = try WorkoutControl.decode(Array(#"{"commandId":"w1","type":"start","timestamp":5,"mode":"mirrored","x":1}"#.utf8))
        #expect(control == WorkoutControl(commandId: "w1", type: .start, timestamp: 5, mode: .mirrored))
        #expect(try WorkoutControl.decode(control.json.serialized()) == control)
        let bare = try WorkoutControl.decode(Array(#"{"commandId":"w2","type":"pause","timestamp":5}"#.utf8))
        #expect(bare.mode == nil)
    }

    @Test(arguments: [
        (#"{"commandId":"w1","type":"jump","timestamp":5}"#, "w1"),
        (#"{"commandId":"w1","type":"start","timestamp":5,"mode":"solo"}"#, "w1"),
        (#"{"commandId":"w1","type":"start"}"#, "w1"),
        (#"{"commandId":"w 1","type":"start","timestamp":5}"#, ""),
    ])
    func rejectsInvalidControls(_ text: String, _ id: String) {
        guard let failure = DecodeFailure.of({ try WorkoutControl.decode(Array(text.utf8)) }) else {
            Issue.record("accepted \(text)")
            return
        }
        #expect(failure.id == id && failure.rejection.code == .invalidPayload)
    }

    static let flightText = #"{"timestamp":1000,"elapsedTime":12.5,"distance":40.2,"pace":310.4,"altitude":31,"heading":92.5,"gpwsStatus":"caution","latitude":51.5,"longitude":-0.16}"#

    @Test func decodesAndEncodesFlightData() throws {
        let flight = try FlightData.decode(Array(Self.flightText.utf8))
        #expect(flight == FlightData(timestamp: 1000, elapsedTime: 12.5, distance: 40.2, pace: 310.4, altitude: 31, heading: 92.5, gpwsStatus: .caution, latitude: 51.5, longitude: -0.16))
        #expect(flight.json.text == Self.flightText)
        #expect(try FlightData.decode(flight.json.serialized()) == flight)
    }

    @Test(arguments: [
        ("latitude", "90.5"), ("latitude", "-91"), ("longitude", "180.1"), ("longitude", "-200"),
        ("distance", "-1"), ("elapsedTime", "-0.5"), ("pace", "-3"), ("heading", "361"),
        ("gpwsStatus", "\"panic\""), ("altitude", "\"high\""), ("distance", "null"),
    ])
    func rejectsInvalidFlightData(_ key: String, _ value: String) throws {
        var json = try JSON.parse(Self.flightText)
        guard case .object(var members) = json else { return }
        members.removeAll { $0.key == key }
        members.append(.init(key, try JSON.parse(value)))
        json = .object(members)
        guard let failure = DecodeFailure.of({ try FlightData.decode(json.serialized()) }) else {
            Issue.record("accepted \(key)=\(value)")
            return
        }
        #expect(failure.id == "flight:1000")
        #expect(failure.rejection.code == .invalidPayload)
        #expect(failure.rejection.message.contains(key))
    }

    @Test func aFlightWithoutTimestampHasNoId() {
        guard let failure = DecodeFailure.of({ try FlightData.decode(Array(#"{"distance":1}"#.utf8)) }) else {
            Issue.record("accepted")
            return
        }
        #expect(failure.id == "")
    }

    @Test func decodesAndEncodesHealthData() throws {
        let text = #"{"timestamp":2000,"heartRate":151,"cadence":172,"activeEnergy":12.3}"#
        let health = try HealthData.decode(Array(text.utf8))
        #expect(health == HealthData(timestamp: 2000, heartRate: 151, cadence: 172, activeEnergy: 12.3))
        #expect(health.json.text == text)
    }

    @Test(arguments: [
        #"{"timestamp":2000,"heartRate":-1,"cadence":172,"activeEnergy":1}"#,
        #"{"timestamp":2000,"heartRate":150,"cadence":-2,"activeEnergy":1}"#,
        #"{"timestamp":2000,"heartRate":150,"cadence":172}"#,
        #"{"timestamp":2000,"heartRate":"fast","cadence":172,"activeEnergy":1}"#,
    ])
    func rejectsInvalidHealthData(_ text: String) {
        guard let failure = DecodeFailure.of({ try HealthData.decode(Array(text.utf8)) }) else {
            Issue.record("accepted \(text)")
            return
        }
        #expect(failure.id == "health:2000" && failure.rejection.code == .invalidPayload)
    }

    @Test func startOrigin() {
        #expect(StartOrigin(device: .phone, origin: .phone) == .local)
        #expect(StartOrigin(device: .watch, origin: .phone) == .remote)
        #expect(StartOrigin(device: .watch, origin: .watch) == .local)
    }
}
