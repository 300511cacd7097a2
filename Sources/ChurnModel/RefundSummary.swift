import Foundation

/// The refund requests of a stretch, counted (`churnwatch refunds`, the report's panel).
public struct RefundSummary: Sendable, Equatable, Codable {
    public var requests = 0
    public var answeredInTime = 0
    public var notSent = 0
    public var failed = 0
    /// Still open: pending or being sent, deadline ahead.
    public var open = 0
    public var refunded = 0
    public var declined = 0
    /// Requests by policy branch (none yet: "pending"), with Apple's decisions.
    public var byBranch: [Branch] = []

    public struct Branch: Sendable, Equatable, Codable {
        public var branch: String
        public var requests: Int
        public var refunded: Int
        public var declined: Int

        public init(branch: String, requests: Int, refunded: Int, declined: Int) {
            self.branch = branch
            self.requests = requests
            self.refunded = refunded
            self.declined = declined
        }
    }

    public init() {}
}
