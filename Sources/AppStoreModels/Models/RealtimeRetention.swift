/// The App Store's real-time request for a retention message (Retention Messaging API): the
/// payload of the `signedPayload` it POSTs to the developer's Get Retention Message URL when a
/// customer opens a subscription's page.
///
/// [DecodedRealtimeRequestBody](https://developer.apple.com/documentation/retentionmessaging/decodedrealtimerequestbody)
public struct DecodedRealtimeRequestBody: Codable, Hashable, Sendable {
    public var originalTransactionId: String
    public var appAppleId: Int64?
    public var productId: String
    /// The customer's locale as Apple sends it (`en-US`, `fr_FR`, ...).
    public var userLocale: String
    /// A UUID per request; Apple sends the same one again when it retries.
    public var requestIdentifier: String
    public var signedDate: EpochMilliseconds
    public var rawEnvironment: String

    enum CodingKeys: String, CodingKey {
        case originalTransactionId, appAppleId, productId, userLocale, requestIdentifier, signedDate
        case rawEnvironment = "environment"
    }

    public init(originalTransactionId: String, appAppleId: Int64?, productId: String, userLocale: String,
                requestIdentifier: String, signedDate: EpochMilliseconds, rawEnvironment: String) {
        self.originalTransactionId = originalTransactionId
        self.appAppleId = appAppleId
        self.productId = productId
        self.userLocale = userLocale
        self.requestIdentifier = requestIdentifier
        self.signedDate = signedDate
        self.rawEnvironment = rawEnvironment
    }
}

/// The answer to a real-time request (`RealtimeResponseBody`): exactly one of its members.
///
/// [RealtimeResponseBody](https://developer.apple.com/documentation/retentionmessaging/realtimeresponsebody)
public struct RealtimeResponseBody: Codable, Hashable, Sendable {
    public struct Message: Codable, Hashable, Sendable {
        public var messageIdentifier: String
        public init(messageIdentifier: String) { self.messageIdentifier = messageIdentifier }
    }

    /// A switch-plan suggestion.
    public struct AlternateProduct: Codable, Hashable, Sendable {
        public var messageIdentifier: String
        public var productId: String
        public var billingPlanType: String?
        public init(messageIdentifier: String, productId: String, billingPlanType: String? = nil) {
            (self.messageIdentifier, self.productId, self.billingPlanType) = (messageIdentifier, productId, billingPlanType)
        }
    }

    /// A promotional offer, signed for this answer.
    public struct PromotionalOffer: Codable, Hashable, Sendable {
        public var messageIdentifier: String
        /// The offer signature's JWS form (compact, ES256).
        public var promotionalOfferSignatureV2: String?
        public var promotionalOfferSignatureV1: PromotionalOfferSignatureV1?
        public init(messageIdentifier: String, promotionalOfferSignatureV2: String? = nil,
                    promotionalOfferSignatureV1: PromotionalOfferSignatureV1? = nil) {
            self.messageIdentifier = messageIdentifier
            self.promotionalOfferSignatureV2 = promotionalOfferSignatureV2
            self.promotionalOfferSignatureV1 = promotionalOfferSignatureV1
        }
    }

    /// The offer signature's original form.
    public struct PromotionalOfferSignatureV1: Codable, Hashable, Sendable {
        public var encodedSignature: String
        public var productId: String
        public var nonce: String
        public var timestamp: Int64
        public var keyId: String
        public var offerIdentifier: String
        public var appAccountToken: String?
        public init(encodedSignature: String, productId: String, nonce: String, timestamp: Int64, keyId: String,
                    offerIdentifier: String, appAccountToken: String? = nil) {
            (self.encodedSignature, self.productId, self.nonce, self.timestamp) = (encodedSignature, productId, nonce, timestamp)
            (self.keyId, self.offerIdentifier, self.appAccountToken) = (keyId, offerIdentifier, appAccountToken)
        }
    }

    public var message: Message?
    public var alternateProduct: AlternateProduct?
    public var promotionalOffer: PromotionalOffer?

    public init(message: Message? = nil, alternateProduct: AlternateProduct? = nil, promotionalOffer: PromotionalOffer? = nil) {
        (self.message, self.alternateProduct, self.promotionalOffer) = (message, alternateProduct, promotionalOffer)
    }

    /// The message the answer shows, whichever its kind; nil when it has none (not a valid answer).
    public var messageIdentifier: String? {
        message?.messageIdentifier ?? alternateProduct?.messageIdentifier ?? promotionalOffer?.messageIdentifier
    }

    /// Apple's rule: exactly one member.
    public var isValid: Bool {
        [message != nil, alternateProduct != nil, promotionalOffer != nil].filter { $0 }.count == 1 && messageIdentifier != nil
    }
}
