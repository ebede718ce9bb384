@testable import TandemCoordinator
import Testing

/// ``BrokerLink/Reading``: when a leader keeps its partitions and when a standby may take
/// a lease, as pure functions of the connection and of how long the broker was quiet.
/// (Over real cut links between network namespaces: NetworkFaultTests.)
@Suite struct BrokerLinkTests {
    let limit = Duration.seconds(3)

    @Test func aLeaderKeepsItsPartitionsUntilTheBrokerWasQuietForTheLimit() {
        #expect(BrokerLink.Reading(connected: true, quiet: .milliseconds(400)).leaderKeeps(limit: limit))
        #expect(BrokerLink.Reading(connected: true, quiet: .milliseconds(2_999)).leaderKeeps(limit: limit))
        // Connected as far as TCP knows, but nothing came back: a cut link.
        #expect(!BrokerLink.Reading(connected: true, quiet: .seconds(3)).leaderKeeps(limit: limit))
        #expect(!BrokerLink.Reading(connected: true, quiet: nil).leaderKeeps(limit: limit))
    }

    @Test func aBrokerRestartShorterThanTheLimitEndsNoTerm() {
        // Disconnected (the broker closed the connection as it stopped), heard a second ago.
        let restarting = BrokerLink.Reading(connected: false, quiet: .seconds(1))
        #expect(restarting.leaderKeeps(limit: limit))
        // ... but no standby takes a lease over such a link.
        #expect(!restarting.standbyMayLead(limit: limit))
        #expect(!BrokerLink.Reading(connected: false, quiet: .seconds(4)).leaderKeeps(limit: limit))
    }

    @Test func aStandbyMayLeadOnlyWhileConnectedAndHeard() {
        #expect(BrokerLink.Reading(connected: true, quiet: .milliseconds(10)).standbyMayLead(limit: limit))
        #expect(!BrokerLink.Reading(connected: true, quiet: .seconds(5)).standbyMayLead(limit: limit))
        #expect(!BrokerLink.Reading(connected: false, quiet: nil).standbyMayLead(limit: limit))
        #expect(!BrokerLink.Reading(connected: true, quiet: nil).standbyMayLead(limit: limit))
    }
}
