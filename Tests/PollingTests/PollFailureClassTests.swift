import ChurnStore
import Polling
import Testing

/// How a stored failure class counts for the run: the engine stops on an outage, a rejected key
/// or an untrusted server, and goes on past a subscription's own failure.
@Suite("Poll failure classes (pure rule)")
struct PollFailureClassTests {
    @Test func appleOutagesCountTowardsStoppingTheRun() {
        #expect(PollFailureClass(.rateLimited) == .appleUnavailable)
        #expect(PollFailureClass(.unavailable) == .appleUnavailable)
    }

    @Test func aRejectedKeyAndAnUntrustedServerStopTheRun() {
        #expect(PollFailureClass(.unauthorized) == .unauthorized)
        #expect(PollFailureClass(.untrustedServer) == .untrustedServer)
    }

    @Test func everyOtherClassIsAboutTheSubscriptionOnly() {
        for c in [ItemFailureClass.notFound, .badRequest, .verification, .malformed, .internal, .unknown] {
            #expect(PollFailureClass(c) == .subscription, "\(c)")
        }
    }

    @Test func whatStopsTheRunIsWhatAResumeRetries() {
        for c in ItemFailureClass.allCases {
            #expect(c.retriedOnResume == (PollFailureClass(c) != .subscription), "\(c)")
        }
    }
}
