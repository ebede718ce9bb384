import Testing
@testable import TandemCore

private func control(_ type: WorkoutControl.Kind, at time: Millis = 1_000, mode: WorkoutMode? = nil) -> WorkoutControl {
    WorkoutControl(commandId: "c-\(type.rawValue)-\(time)", type: type, timestamp: time, mode: mode)
}

private func flight(at time: Millis, distance: Double = 100, elapsed: Double = 30) -> FlightData {
    FlightData(timestamp: time, elapsedTime: elapsed, distance: distance, pace: 300, altitude: 10, heading: 90, gpwsStatus: .normal, latitude: 51.5, longitude: -0.1)
}

private func health(at time: Millis, heartRate: Double) -> HealthData {
    HealthData(timestamp: time, heartRate: heartRate, cadence: 170, activeEnergy: 5)
}

/// A workout started from `origin` and brought to `status`.
private func workout(_ status: WorkoutStatus, origin: Device = .phone) -> WorkoutState {
    var state: WorkoutState? = nil
    _ = WorkoutState.apply(control(.start, at: 1_000), from: origin, to: &state, user: "alice", workoutId: "run1")
    switch status {
    case .running: break
    case .paused: _ = state!.apply(control: control(.pause, at: 2_000), from: origin)
    case .finished: _ = state!.apply(control: control(.stop, at: 2_000), from: origin)
    }
    return state!
}

@Suite struct WorkoutStateTests {
    @Test(arguments: Device.allCases)
    func startCreatesARunningWorkout(_ device: Device) throws {
        var state: WorkoutState? = nil
        let outcome = WorkoutState.apply(control(.start, at: 1_000, mode: .mirrored), from: device, to: &state, user: "alice", workoutId: "run1")
        #expect(outcome == WorkoutOutcome(rejection: nil, version: 1, statusChanged: true))
        let started = try #require(state)
        #expect(started.status == .running && started.origin == device && started.mode == .mirrored)
        #expect(started.startedAt == 1_000 && started.endedAt == nil)
        #expect(started.startOrigin(of: device) == .local)
        #expect(started.startOrigin(of: device.other) == .remote)
    }

    @Test func modeDefaultsToStandalone() {
        #expect(workout(.running).mode == .standalone)
    }

    @Test(arguments: [(WorkoutControl.Kind.pause, ReceiptCode.notRunning), (.resume, .notPaused), (.stop, .notRunning)])
    func controlsOnAnUnknownWorkout(_ type: WorkoutControl.Kind, _ code: ReceiptCode) {
        var state: WorkoutState? = nil
        let outcome = WorkoutState.apply(control(type), from: .phone, to: &state, user: "alice", workoutId: "run1")
        #expect(outcome.rejection?.code == code)
        #expect(outcome.version == nil)
        #expect(state == nil)
    }

    /// Every control in every status, from both devices.
    @Test(arguments: WorkoutStatus.allCases, WorkoutControl.Kind.allCases)
    func controlTable(_ status: WorkoutStatus, _ type: WorkoutControl.Kind) {
        enum Expected { case next(WorkoutStatus), rejected(ReceiptCode) }
        let expected: Expected = switch (status, type) {
        case (_, .start): .rejected(.alreadyStarted)
        case (.running, .pause): .next(.paused)
        case (_, .pause): .rejected(.notRunning)
        case (.paused, .resume): .next(.running)
        case (_, .resume): .rejected(.notPaused)
        case (.running, .stop), (.paused, .stop): .next(.finished)
        case (.finished, .stop): .rejected(.notRunning)
        }
        for device in Device.allCases {
            var state = workout(status)
            let before = state
            let outcome = state.apply(control: control(type, at: 5_000), from: device)
            switch expected {
            case .next(let next):
                #expect(outcome == WorkoutOutcome(rejection: nil, version: before.version + 1, statusChanged: true))
                #expect(state.status == next)
            case .rejected(let code):
                #expect(outcome.rejection?.code == code)
                #expect(outcome.version == before.version && !outcome.statusChanged)
                #expect(state == before)
            }
        }
    }

    @Test func stopRecordsTheEndAndAPausedWorkoutCanStop() {
        var state = workout(.paused)
        _ = state.apply(control: control(.stop, at: 9_000), from: .watch)
        #expect(state.status == .finished && state.endedAt == 9_000)
    }

    @Test func aSecondStartIsAlreadyStarted() {
        // The reorder buffer applies the earlier start first; the later one loses.
        var state: WorkoutState? = nil
        _ = WorkoutState.apply(control(.start, at: 1_000), from: .watch, to: &state, user: "alice", workoutId: "run1")
        let second = WorkoutState.apply(control(.start, at: 1_005), from: .phone, to: &state, user: "alice", workoutId: "run1")
        #expect(second.rejection?.code == .alreadyStarted && second.version == 1)
        #expect(state?.origin == .watch && state?.startedAt == 1_000)
    }

    @Test func flightIsAcceptedFromTheOriginWhileRunning() {
        var state = workout(.running, origin: .watch)
        let outcome = state.apply(flight: flight(at: 1_500), from: .watch)
        #expect(outcome == WorkoutOutcome(rejection: nil, version: 2, statusChanged: false))
        #expect(state.flight == flight(at: 1_500))
        #expect(state.elapsedTime == 30)
    }

    @Test func flightFromTheRemoteDeviceIsNotOrigin() {
        var state = workout(.running, origin: .phone)
        let outcome = state.apply(flight: flight(at: 1_500), from: .watch)
        #expect(outcome.rejection?.code == .notOrigin && outcome.version == 1)
        #expect(state.flight == nil)
        // The origin check comes before the status check.
        var paused = workout(.paused, origin: .phone)
        #expect(paused.apply(flight: flight(at: 1_500), from: .watch).rejection?.code == .notOrigin)
    }

    @Test(arguments: [WorkoutStatus.paused, .finished])
    func flightWhileNotRunning(_ status: WorkoutStatus) {
        var state = workout(status)
        #expect(state.apply(flight: flight(at: 3_000), from: .phone).rejection?.code == .notRunning)
    }

    @Test func staleFlight() {
        var state = workout(.running)
        _ = state.apply(flight: flight(at: 2_000, distance: 50), from: .phone)
        for time: Millis in [2_000, 1_999] {
            let outcome = state.apply(flight: flight(at: time, distance: 99), from: .phone)
            #expect(outcome.rejection?.code == .stale && outcome.version == 2)
        }
        #expect(state.flight?.distance == 50)
        #expect(state.apply(flight: flight(at: 2_001), from: .phone).isAccepted)
    }

    @Test func telemetryOnAnUnknownWorkout() {
        var state: WorkoutState? = nil
        let f = WorkoutState.apply(flight: flight(at: 1), from: .phone, to: &state)
        #expect(f.rejection?.code == .notRunning && f.version == nil)
        #expect(WorkoutState.apply(health: health(at: 1, heartRate: 90), from: .phone, to: &state).rejection?.code == .watchOnly)
        #expect(WorkoutState.apply(health: health(at: 1, heartRate: 90), from: .watch, to: &state).rejection?.code == .notRunning)
        #expect(f.receipt(id: FlightData.receiptId(timestamp: 1)) == Receipt(id: "flight:1", kind: .workout, status: .rejected, code: .notRunning, message: "the workout has not started", version: nil))
    }

    @Test(arguments: Device.allCases)
    func healthFromThePhoneIsWatchOnly(_ origin: Device) {
        var state = workout(.running, origin: origin)
        #expect(state.apply(health: health(at: 1_500, heartRate: 120), from: .phone).rejection?.code == .watchOnly)
        let outcome = state.apply(health: health(at: 1_500, heartRate: 120), from: .watch)
        #expect(outcome.isAccepted && outcome.version == 2)
        #expect(state.health?.heartRate == 120)
    }

    @Test(arguments: [WorkoutStatus.paused, .finished])
    func healthWhileNotRunning(_ status: WorkoutStatus) {
        var state = workout(status)
        #expect(state.apply(health: health(at: 3_000, heartRate: 120), from: .watch).rejection?.code == .notRunning)
        #expect(state.heartRate.count == 0)
    }

    @Test func anOlderHealthSampleCountsButDoesNotReplaceTheNewest() {
        var state = workout(.running)
        _ = state.apply(health: health(at: 3_000, heartRate: 150), from: .watch)
        _ = state.apply(health: health(at: 2_000, heartRate: 170), from: .watch)
        #expect(state.health?.timestamp == 3_000)
        #expect(state.heartRate.maximum == 170 && state.heartRate.count == 2)
        #expect(state.version == 3)
    }

    @Test func summaryMath() throws {
        var state = workout(.running)
        #expect(state.summary == nil)
        _ = state.apply(flight: flight(at: 2_000, distance: 1_000, elapsed: 200), from: .phone)
        _ = state.apply(flight: flight(at: 3_000, distance: 2_500, elapsed: 750), from: .phone)
        for (i, bpm) in [120.0, 150, 165, 145].enumerated() {
            _ = state.apply(health: health(at: 2_000 + Millis(i), heartRate: bpm), from: .watch)
        }
        _ = state.apply(control: control(.stop, at: 4_000), from: .watch)
        let summary = try #require(state.summary)
        #expect(summary.distance == 2_500 && summary.elapsedTime == 750)
        #expect(summary.averagePace == 300)
        #expect(summary.averageHeartRate == 145)
        #expect(summary.maxHeartRate == 165)
        #expect(state.version == 8)
    }

    @Test func summaryWithoutTelemetry() throws {
        let summary = try #require(workout(.finished).summary)
        #expect(summary == WorkoutSummary(distance: 0, elapsedTime: 0, averagePace: nil, averageHeartRate: nil, maxHeartRate: nil))
        #expect(summary.json.text == #"{"distance":0,"elapsedTime":0,"averagePace":null,"averageHeartRate":null,"maxHeartRate":null}"#)
        let standing = WorkoutSummary(lastFlight: flight(at: 1, distance: 0, elapsed: 60), heartRate: HeartRateStatistics())
        #expect(standing.averagePace == nil && standing.elapsedTime == 60)
    }
}

@Suite struct WorkoutWireTests {
    @Test func runningSnapshotMatchesTheContract() {
        var state = workout(.running, origin: .watch)
        _ = state.apply(health: health(at: 1_200, heartRate: 130), from: .watch)
        #expect(state.snapshot(epoch: "ep").text == #"{"user":"alice","workoutId":"run1","epoch":"ep","status":"running","mode":"standalone","#
            + #""origin":"watch","startedAt":1000,"elapsedTime":0,"flight":null,"#
            + #""health":{"timestamp":1200,"heartRate":130,"cadence":170,"activeEnergy":5},"version":2}"#)
    }

    @Test func finishedSnapshotHasEndAndSummary() throws {
        var state = workout(.running)
        _ = state.apply(flight: flight(at: 1_500, distance: 1_000, elapsed: 330.5), from: .phone)
        _ = state.apply(control: control(.stop, at: 2_000), from: .phone)
        let json = state.snapshot(epoch: "ep")
        #expect(json["endedAt"] == .int(2_000))
        #expect(json["elapsedTime"] == .double(330.5))
        #expect(json["summary"]?["averagePace"] == .double(330.5))
        let keys: [String] = if case .object(let members) = json { members.map(\.key) } else { [] }
        #expect(keys == ["user", "workoutId", "epoch", "status", "mode", "origin", "startedAt", "endedAt", "elapsedTime", "flight", "health", "summary", "version"])
        let decoded = try WorkoutSnapshot.decode(json.serialized())
        #expect(decoded == state.workoutSnapshot(epoch: "ep"))
        #expect(decoded.startOrigin(of: .watch) == .remote)
    }

    @Test func runningSnapshotHasNoEndOrSummary() {
        let json = workout(.paused).snapshot(epoch: "ep")
        #expect(json["endedAt"] == nil && json["summary"] == nil)
    }

    @Test func snapshotDecoderIsLenient() throws {
        let text = #"{"user":"alice","workoutId":"w","status":"running","origin":"phone","version":4,"new":[1],"health":"broken","#
            + #""flight":{"timestamp":1000,"elapsedTime":12.5,"distance":40,"pace":310,"altitude":1,"heading":0,"gpwsStatus":"normal","latitude":0,"longitude":0}}"#
        let snapshot = try WorkoutSnapshot.decode(Array(text.utf8))
        #expect(snapshot.mode == .standalone && snapshot.epoch == "" && snapshot.health == nil)
        #expect(snapshot.elapsedTime == 12.5)
        #expect(throws: Rejection.self) { try WorkoutSnapshot.decode(Array(#"{"user":"alice"}"#.utf8)) }
    }

    @Test(arguments: WorkoutStatus.allCases)
    func persistedFormRoundTrips(_ status: WorkoutStatus) throws {
        var state = workout(.running, origin: .watch)
        _ = state.apply(flight: flight(at: 1_500, distance: 812.25, elapsed: 250.5), from: .watch)
        _ = state.apply(health: health(at: 1_600, heartRate: 141), from: .watch)
        _ = state.apply(health: health(at: 1_700, heartRate: 152.5), from: .watch)
        switch status {
        case .running: break
        case .paused: _ = state.apply(control: control(.pause, at: 1_800), from: .phone)
        case .finished: _ = state.apply(control: control(.stop, at: 1_800), from: .phone)
        }
        let restored = try WorkoutState(persisted: JSON.parse(state.persisted().text))
        #expect(restored == state)
        #expect(restored.summary == state.summary)
    }

    @Test func persistedFormIsChecked() {
        var json = workout(.running).persisted()
        if case .object(var members) = json {
            members.removeAll { $0.key == "endedAt" }
            members.append(.init("endedAt", 5))
            json = .object(members)
        }
        #expect(throws: Rejection.self) { try WorkoutState(persisted: json) }
    }
}
