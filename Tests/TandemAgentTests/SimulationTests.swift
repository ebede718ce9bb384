import Testing
import TandemCore
@testable import TandemAgent

/// The agent's simulators: the built-in route and the heart rate and cadence it shows.
@Suite struct SimulationTests {
    @Test func demoRouteIsALoopOfAFewKilometresAt1Hz() throws {
        let fixes = DemoRoute.fixes(start: 1_000)
        let first = try #require(fixes.first), last = try #require(fixes.last)
        #expect(zip(fixes, fixes.dropFirst()).allSatisfy { $1.time - $0.time == 1_000 })
        #expect(Geodesy.distance(from: first, to: last) < 5)  // back where it started
        var computer = FlightComputer()
        var data: FlightData?
        for fix in fixes { data = computer.add(fix) }
        let result = try #require(data)
        #expect(abs(result.distance - 3_000) < 10)  // chords of a 477 m circle are a hair short
        let pace = result.elapsedTime / (result.distance / 1000)
        #expect(pace > 300 && pace < 360)
    }

    @Test func healthSimulatorIsDeterministicAndPlausible() {
        func run(seed: UInt64) -> [HealthData] {
            var simulator = HealthSimulator(seed: seed)
            return (0...600).map { s in simulator.sample(at: Millis(s) * 1000, pace: s < 30 ? 0 : 330) }
        }
        let a = run(seed: 7), b = run(seed: 7), c = run(seed: 8)
        #expect(a == b)
        #expect(a != c)
        #expect(abs(a[0].heartRate - 90) <= 2)
        #expect(a[0].cadence == 0)
        let late = a[300...]
        #expect(late.allSatisfy { (140...160).contains($0.heartRate) })
        #expect(late.allSatisfy { (150...185).contains($0.cadence) })
        #expect(zip(a, a.dropFirst()).allSatisfy { $1.activeEnergy >= $0.activeEnergy })
        #expect(a.last!.activeEnergy > 60 && a.last!.activeEnergy < 140)  // ~10 kcal a minute
    }

    @Test func fasterPaceRaisesHeartRateAndCadence() {
        func steady(pace: Double) -> HealthData {
            var simulator = HealthSimulator(seed: 1)
            var sample = simulator.sample(at: 0, pace: pace)
            for s in 1...600 { sample = simulator.sample(at: Millis(s) * 1000, pace: pace) }
            return sample
        }
        let easy = steady(pace: 400), hard = steady(pace: 230)
        #expect(hard.heartRate > easy.heartRate + 15)
        #expect(hard.cadence > easy.cadence)
        #expect(hard.heartRate <= 178 && easy.heartRate >= 130)
    }
}
