import ChurnModel
import Testing

/// Whose failure a stored class is: the engine stops on an outage, a rejected key or an
/// untrusted server, and goes on past a subscription's own failure; a resume retries exactly
/// the run's.
@Suite("Failure scope (pure rule)")
struct FailureScopeTests {
    @Test func appleOutagesCountTowardsStoppingTheRun() {
        #expect(ItemFailureClass.rateLimited.scope == .rateLimited)
        #expect(ItemFailureClass.unavailable.scope == .appleUnavailable)
    }

    @Test func aRejectedKeyAndAnUntrustedServerStopTheRun() {
        #expect(ItemFailureClass.unauthorized.scope == .unauthorized)
        #expect(ItemFailureClass.untrustedServer.scope == .untrustedServer)
    }

    @Test func everyOtherClassIsAboutTheSubscriptionOnly() {
        for c in [ItemFailureClass.notFound, .badRequest, .verification, .malformed, .internal, .unknown] {
            #expect(c.scope == .subscription, "\(c)")
        }
    }

    @Test func whatStopsTheRunIsWhatAResumeRetries() {
        for c in ItemFailureClass.allCases {
            #expect(c.retriedOnResume == (c.scope != .subscription), "\(c)")
        }
    }
}
