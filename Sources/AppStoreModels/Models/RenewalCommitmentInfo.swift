/// The commitment that will apply at the next renewal (`commitmentInfo` in renewal info; API 1.21).
public struct RenewalCommitmentInfo: Codable, Hashable, Sendable {
    public var commitmentAutoRenewProductId: String?
    /// Raw `commitmentAutoRenewStatus`. See ``commitmentAutoRenewStatus``.
    public var rawCommitmentAutoRenewStatus: Int32?
    /// Raw `commitmentRenewalBillingPlanType`. See ``commitmentRenewalBillingPlanType``.
    public var rawCommitmentRenewalBillingPlanType: String?
    public var commitmentRenewalDate: EpochMilliseconds?
    /// Milliunits.
    public var commitmentRenewalPrice: Int64?

    public init(
        commitmentAutoRenewProductId: String? = nil, rawCommitmentAutoRenewStatus: Int32? = nil,
        rawCommitmentRenewalBillingPlanType: String? = nil,
        commitmentRenewalDate: EpochMilliseconds? = nil, commitmentRenewalPrice: Int64? = nil
    ) {
        self.commitmentAutoRenewProductId = commitmentAutoRenewProductId
        self.rawCommitmentAutoRenewStatus = rawCommitmentAutoRenewStatus
        self.rawCommitmentRenewalBillingPlanType = rawCommitmentRenewalBillingPlanType
        self.commitmentRenewalDate = commitmentRenewalDate
        self.commitmentRenewalPrice = commitmentRenewalPrice
    }

    public enum CodingKeys: String, CodingKey {
        case commitmentAutoRenewProductId
        case rawCommitmentAutoRenewStatus = "commitmentAutoRenewStatus"
        case rawCommitmentRenewalBillingPlanType = "commitmentRenewalBillingPlanType"
        case commitmentRenewalDate, commitmentRenewalPrice
    }

    public var commitmentAutoRenewStatus: AutoRenewStatus? {
        get { rawCommitmentAutoRenewStatus.flatMap(AutoRenewStatus.init(rawValue:)) }
        set { rawCommitmentAutoRenewStatus = newValue?.rawValue }
    }
    public var commitmentRenewalBillingPlanType: BillingPlanType? {
        get { rawCommitmentRenewalBillingPlanType.flatMap(BillingPlanType.init(rawValue:)) }
        set { rawCommitmentRenewalBillingPlanType = newValue?.rawValue }
    }
}
