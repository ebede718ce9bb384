import Testing
@testable import TandemCore

/// Builds GPX text from fixes, the way a device would record it.
private func gpx(_ fixes: [GPSFix]) -> String {
    func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
    func iso(_ ms: Millis) -> String {
        // Times in these tests fall on 2026-11-21 (UTC).
        let day = GPX.daysFromCivil(year: 2026, month: 11, day: 21) * 86_400_000
        let t = ms - day
        let millis = t % 1000
        let fraction = millis == 0 ? "" : ".\(millis < 100 ? "0" : "")\(millis < 10 ? "0" : "")\(millis)"
        return "2026-11-21T\(two(t / 3_600_000)):\(two(t / 60_000 % 60)):\(two(t / 1000 % 60))\(fraction)Z"
    }
    let points = fixes.map {
        "<trkpt lat=\"\($0.latitude)\" lon=\"\($0.longitude)\"><ele>\($0.altitude)</ele><time>\(iso($0.time))</time></trkpt>"
    }
    return """
    <?xml version="1.0" encoding="UTF-8"?>
    <gpx version="1.1" creator="test"><trk><name>t</name><trkseg>
    \(points.joined(separator: "\n"))
    </trkseg></trk></gpx>
    """
}

private let day = GPX.daysFromCivil(year: 2026, month: 11, day: 21) * 86_400_000
private let t0: Millis = day + 8 * 3_600_000

/// Fixes going north along the meridian at `speed` m/s, one per second.
private func northbound(from start: Millis, seconds: Int, speed: Double, fromLatitude lat: Double = 0) -> [GPSFix] {
    let degreesPerMetre = 0.009 / 1000.75
    return (0...seconds).map { s in
        GPSFix(time: start + Millis(s) * 1000, latitude: lat + Double(s) * speed * degreesPerMetre, longitude: 0, altitude: 12)
    }
}

@Suite struct FlightComputerTests {
    @Test func haversineOnAMeridian() {
        let d = Geodesy.distance(fromLatitude: 0, longitude: 0, toLatitude: 0.009, longitude: 0)
        #expect(abs(d - 1000.8) < 0.5)
    }

    @Test func distanceAndTimeOfAGPXTrackWithAPause() throws {
        // 0.009° of latitude ≈ 1000.8 m: run 0.009° in 300 s, pause for 120 s while walking
        // another 0.0018° (ignored), resume, run 0.009° more in 300 s.
        let first = northbound(from: t0, seconds: 300, speed: 1000.75 / 300)
        let during = northbound(from: t0 + 301_000, seconds: 119, speed: 1.67, fromLatitude: 0.009)
        let resumeAt = t0 + 421_000
        let second = northbound(from: resumeAt, seconds: 300, speed: 1000.75 / 300, fromLatitude: 0.0108)
        let fixes = try GPX.parse(gpx(first + during + second))
        #expect(fixes.count == first.count + during.count + second.count)
        #expect(fixes.first == first.first)

        var computer = FlightComputer()
        var last: FlightData?
        for fix in fixes {
            if fix.time == t0 + 301_000 { computer.pause(at: t0 + 300_500) }
            if fix.time == resumeAt { computer.resume(at: resumeAt) }
            let data = computer.add(fix)
            if fix.time > t0 + 300_000, fix.time < resumeAt {
                #expect(data == nil, "a fix during the pause was counted")
            }
            if let data { last = data }
        }
        let result = try #require(last)
        let expected = 2 * 1000.75
        #expect(abs(result.distance - expected) / expected < 0.005)
        // 300 s + 0.5 s to the pause + 300 s after the resume.
        #expect(abs(result.elapsedTime - 600.5) < 0.001)
        #expect(result.timestamp == resumeAt + 300_000)
        #expect(abs(result.pace - 300) < 3)
        #expect(abs(result.heading) < 0.5 || abs(result.heading - 360) < 0.5)
        #expect(result.altitude == 12)
        #expect(result.gpwsStatus == .normal)
    }

    @Test func pausedTimeDoesNotCount() {
        var computer = FlightComputer()
        _ = computer.add(GPSFix(time: 0, latitude: 0, longitude: 0))
        _ = computer.add(GPSFix(time: 10_000, latitude: 0.0001, longitude: 0))
        computer.pause(at: 12_000)
        #expect(computer.phase == .paused)
        #expect(computer.elapsedTime(at: 50_000) == 12)
        #expect(computer.add(GPSFix(time: 20_000, latitude: 0.01, longitude: 0)) == nil)
        computer.resume(at: 60_000)
        #expect(computer.elapsedTime(at: 61_000) == 13)
        let anchored = computer.add(GPSFix(time: 61_000, latitude: 0.02, longitude: 0))
        // The first fix after a resume only anchors: the jump is not distance.
        #expect(abs((anchored?.distance ?? 0) - 11.12) < 0.05)
        #expect(anchored?.elapsedTime == 13)
    }

    @Test func ignoresFixesThatAreNotNewer() {
        var computer = FlightComputer()
        #expect(computer.add(GPSFix(time: 5_000, latitude: 0, longitude: 0)) != nil)
        #expect(computer.add(GPSFix(time: 5_000, latitude: 1, longitude: 0)) == nil)
        #expect(computer.add(GPSFix(time: 4_000, latitude: 1, longitude: 0)) == nil)
        #expect(computer.distance == 0)
    }

    @Test func headingOfADueEastTrack() throws {
        var computer = FlightComputer()
        var last: FlightData?
        // Along the equator at 3 m/s.
        for s in 0...60 {
            last = computer.add(GPSFix(time: Millis(s) * 1000, latitude: 0, longitude: Double(s) * 3 * 0.009 / 1000.75))
        }
        let data = try #require(last)
        #expect(abs(data.heading - 90) < 0.5)
        #expect(abs(data.pace - 1000 / 3) < 1)
        #expect(abs(data.distance - 180) < 0.5)
    }

    @Test func jitterWhileStandingDoesNotSpinTheHeading() {
        var computer = FlightComputer()
        for s in 0...10 {
            _ = computer.add(GPSFix(time: Millis(s) * 1000, latitude: 0, longitude: Double(s) * 3 * 0.009 / 1000.75))
        }
        #expect(abs(computer.heading - 90) < 0.5)
        // Standing where the run stopped, with a metre of GPS jitter north and south.
        for s in 11...40 {
            _ = computer.add(GPSFix(time: Millis(s) * 1000, latitude: (s % 2 == 0 ? 1 : -1) * 0.000009, longitude: 30 * 0.009 / 1000.75))
            #expect(abs(computer.heading - 90) < 7)
        }
    }

    @Test func paceIsSmoothedOverTheLast30Seconds() throws {
        var computer = FlightComputer()
        // 60 s at 4 m/s then 30 s at 2 m/s: after the switch the window holds only the slow part.
        var metres = 0.0
        var last: FlightData?
        for s in 0...90 {
            if s > 0 { metres += s <= 60 ? 4 : 2 }
            last = computer.add(GPSFix(time: Millis(s) * 1000, latitude: metres * 0.009 / 1000.75, longitude: 0))
            if s == 60 { #expect(abs((last?.pace ?? 0) - 250) < 1) }
            if s == 75 { #expect(abs((last?.pace ?? 0) - 1000 / 3) < 2) }  // half and half: 3 m/s
        }
        #expect(abs(try #require(last).pace - 500) < 2)
    }

    @Test func standingStillHasNoPace() {
        var computer = FlightComputer(targetPace: 300)
        _ = computer.add(GPSFix(time: 0, latitude: 0, longitude: 0))
        let data = computer.add(GPSFix(time: 10_000, latitude: 0.000001, longitude: 0))
        #expect(data?.pace == 0)
        #expect(data?.gpwsStatus == .normal)
    }

    @Test(arguments: [
        (300.0, Optional<Double>.none, GPWSStatus.normal),
        (400, nil, .normal),
        (300, 300, .normal),
        (315, 300, .normal),  // exactly 5% slower
        (316, 300, .caution),
        (345, 300, .caution),  // exactly 15% slower
        (346, 300, .warning),
        (250, 300, .normal),  // faster than target
        (0, 300, .normal),  // pace unknown
    ])
    func gpwsThresholds(_ pace: Double, _ target: Double?, _ expected: GPWSStatus) {
        #expect(FlightComputer.gpwsStatus(pace: pace, target: target) == expected)
    }

    @Test func gpwsFollowsTheTargetPace() throws {
        var computer = FlightComputer(targetPace: 300)
        var last: FlightData?
        for fix in northbound(from: 0, seconds: 40, speed: 2.5) { last = computer.add(fix) }  // 400 s/km
        #expect(try #require(last).gpwsStatus == .warning)
        computer.targetPace = 390
        last = computer.add(GPSFix(time: 41_000, latitude: 41 * 2.5 * 0.009 / 1000.75, longitude: 0))
        #expect(try #require(last).gpwsStatus == .normal)
    }
}

@Suite struct GPXTests {
    @Test func parsesTimes() {
        #expect(GPX.parseTime("1970-01-01T00:00:00Z") == 0)
        #expect(GPX.parseTime("2000-03-01T00:00:00Z") == 951_868_800_000)
        #expect(GPX.parseTime("2026-11-21T08:30:05.250Z") == 1_795_249_805_250)
        #expect(GPX.parseTime("2026-11-21T09:30:05.25+01:00") == 1_795_249_805_250)
        #expect(GPX.parseTime("2024-02-29T12:00:00.1234Z") == 1_709_208_000_123)
    }

    @Test(arguments: ["", "2026-11-21", "2026-11-21T08:30:05", "2026-13-01T00:00:00Z", "2025-02-29T00:00:00Z",
                      "2026-11-21T24:00:00Z", "2026-11-21T08:30:05.Z", "2026-11-21T08:30:05Zjunk", "2026-11-21 08:30:05Z"])
    func refusesMalformedTimes(_ text: String) {
        #expect(GPX.parseTime(text) == nil)
    }

    @Test func parsesTrackPointsInAnyAttributeOrder() throws {
        let text = """
        <gpx><metadata><time>2026-01-01T00:00:00Z</time></metadata><trk><trkseg>
        <trkpt lon='-0.5' lat='51.25'>
          <ele> 12.5 </ele>
          <time>2026-11-21T08:30:05Z</time>
        </trkpt>
        <trkpt lat="51.2501" lon="-0.5"><time>2026-11-21T08:30:06Z</time><extensions><hr>140</hr></extensions></trkpt>
        </trkseg></trk></gpx>
        """
        let fixes = try GPX.parse(text)
        #expect(fixes == [
            GPSFix(time: 1_795_249_805_000, latitude: 51.25, longitude: -0.5, altitude: 12.5),
            GPSFix(time: 1_795_249_806_000, latitude: 51.2501, longitude: -0.5, altitude: 0),
        ])
    }

    @Test func aFileWithoutTrackPointsIsAClearError() {
        let route = #"<gpx><rte><rtept lat="1" lon="2"/></rte><trk><trkseg></trkseg></trk></gpx>"#
        #expect(throws: GPX.ParseError.noTrackPoints) { try GPX.parse(route) }
        #expect(GPX.ParseError.noTrackPoints.description.contains("no track points"))
    }

    @Test(arguments: [
        #"<trkpt lat="91" lon="0"><time>2026-11-21T08:30:05Z</time></trkpt>"#,
        #"<trkpt lon="0"><time>2026-11-21T08:30:05Z</time></trkpt>"#,
        #"<trkpt lat="1" lon="0"></trkpt>"#,
        #"<trkpt lat="1" lon="0"><time>yesterday</time></trkpt>"#,
        #"<trkpt lat="1" lon="0"><ele>high</ele><time>2026-11-21T08:30:05Z</time></trkpt>"#,
        #"<trkpt lat="1" lon="0"><time>2026-11-21T08:30:05Z</time>"#,
    ])
    func refusesBadTrackPoints(_ text: String) {
        #expect {
            try GPX.parse(text)
        } throws: { error in
            guard case GPX.ParseError.invalidTrackPoint(index: 0, _) = error else { return false }
            return true
        }
    }
}
