/// Monthly billing on a 12-month commitment, as seen on a transaction (`commitmentInfo`; API 1.21).
public struct TransactionCommitmentInfo: Codable, Hashable, Sendable {
    /// Which billing period of the commitment this transaction pays (1-based).
    public var billingPeriodNumber: Int32?
    public var totalBillingPeriods: Int32?
    public var commitmentExpiresDate: EpochMilliseconds?
    /// Price of the whole commitment in milliunits.
    public var commitmentPrice: Int64?

    public init(
        billingPeriodNumber: Int32? = nil, totalBillingPeriods: Int32? = nil,
        commitmentExpiresDate: EpochMilliseconds? = nil, commitmentPrice: Int64? = nil
    ) {
        self.billingPeriodNumber = billingPeriodNumber
        self.totalBillingPeriods = totalBillingPeriods
        self.commitmentExpiresDate = commitmentExpiresDate
        self.commitmentPrice = commitmentPrice
    }
}
