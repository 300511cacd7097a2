import AppStoreModels
import Crypto
import Foundation

/// Signs promotional offers for the app to redeem, in both of Apple's forms
/// (docs/apple-api.md, "Offer signatures"): the original signature (StoreKit's `Product.PurchaseOption
/// .promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`) and the newer JWS
/// (`PromotionalOfferV2SignatureCreator`). The In-App Purchase key stays inside this value.
public struct PromotionalOfferSigner: Sendable {
    /// Everything the app needs to redeem one offer once; good for 24 hours from `timestamp`.
    public struct SignedOffer: Sendable, Equatable {
        public var offerId: String
        /// The product the signature is for.
        public var productId: String
        /// The In-App Purchase key id (`keyIdentifier`).
        public var keyId: String
        /// A fresh lowercase UUID.
        public var nonce: String
        /// Milliseconds since 1970.
        public var timestamp: Int64
        /// The original form: base64 of the DER ECDSA P-256 SHA-256 signature.
        public var signature: String
        /// The newer form: a compact JWS (ES256).
        public var jws: String
    }

    /// The JWS form's claims, with Apple's names.
    public struct OfferClaims: Codable, Sendable, Equatable {
        public var iss: String
        public var bid: String
        public var aud: String
        public var iat: Int64
        public var nonce: String
        public var productId: String
        public var offerIdentifier: String
        public var transactionId: String?
    }

    /// How long Apple accepts a signature after its timestamp.
    public static let validity: TimeInterval = 24 * 60 * 60
    /// Apple's separator between the fields of the original form (U+2063 INVISIBLE SEPARATOR).
    public static let separator = "\u{2063}"
    public static let audience = "promotional-offer"

    private let issuerId: String
    private let keyId: String
    private let bundleId: String
    private let key: P256.Signing.PrivateKey

    public init(issuerId: String, keyId: String, bundleId: String, privateKey: P256.Signing.PrivateKey) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.bundleId = bundleId
        self.key = privateKey
    }

    public init(configuration: AppStoreConfiguration) {
        self.init(issuerId: configuration.issuerId, keyId: configuration.keyId, bundleId: configuration.bundleId,
                  privateKey: configuration.signingKey.key)
    }

    /// The message of the original form: bundle id, key id, product, offer, lowercase
    /// `appAccountToken` ("" when none), lowercase nonce and the timestamp in ms, joined by U+2063.
    public func message(productId: String, offerId: String, appAccountToken: String?, nonce: String, timestamp: Int64) -> String {
        [bundleId, keyId, productId, offerId, (appAccountToken ?? "").lowercased(), nonce.lowercased(), String(timestamp)]
            .joined(separator: Self.separator)
    }

    /// Signs one offer at `now` with a fresh nonce. `transactionId` (recommended by Apple: the
    /// subscription's original transaction id) goes into the JWS form.
    public func sign(productId: String, offerId: String, appAccountToken: String?, transactionId: String?,
                     now: Date, nonce: UUID = UUID()) throws -> SignedOffer {
        let nonceText = nonce.uuidString.lowercased()
        let timestamp = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        let text = message(productId: productId, offerId: offerId, appAccountToken: appAccountToken, nonce: nonceText, timestamp: timestamp)
        let signature = try key.signature(for: Data(text.utf8)).derRepresentation.base64EncodedString()
        let claims = OfferClaims(iss: issuerId, bid: bundleId, aud: Self.audience, iat: timestamp / 1000, nonce: nonceText,
                                 productId: productId, offerIdentifier: offerId, transactionId: transactionId)
        let input = try CompactJWS.signingInput(header: JWSHeader(alg: "ES256", kid: keyId, typ: "JWT"), payload: claims)
        let jwsSignature = try key.signature(for: Data(input.utf8))
        return SignedOffer(offerId: offerId, productId: productId, keyId: keyId, nonce: nonceText, timestamp: timestamp,
                           signature: signature,
                           jws: CompactJWS.serialize(signingInput: input, signature: jwsSignature.rawRepresentation))
    }
}

extension PromotionalOfferSigner {
    /// The signer from the four settings it needs (`APPSTORE_ISSUER_ID`, `APPSTORE_KEY_ID`,
    /// `APPSTORE_PRIVATE_KEY_PATH`, `APPSTORE_BUNDLE_ID`), without the rest of the Apple
    /// configuration: a host that only claims entries needs no roots or base URLs.
    public static func fromEnvironment(_ env: [String: String]) throws(ConfigurationError) -> PromotionalOfferSigner {
        typealias V = AppStoreConfiguration.Variable
        func required(_ name: String, _ what: String) throws(ConfigurationError) -> String {
            guard let v = env[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !v.isEmpty else {
                throw ConfigurationError(name, "required to sign promotional offers: \(what)")
            }
            return v
        }
        let issuerId = try required(V.issuerId, "the issuer ID from App Store Connect")
        let keyId = try required(V.keyId, "the ID of the In-App Purchase key")
        let bundleId = try required(V.bundleId, "the app's bundle ID")
        var warnings: [String] = []
        let key: P256.Signing.PrivateKey
        if (env[V.privateKeyPath] ?? "").isEmpty, let pem = env[V.privateKey], !pem.isEmpty {
            key = try AppStoreConfiguration.parsePrivateKey(pem, source: "the value", variable: V.privateKey)
        } else {
            key = try AppStoreConfiguration.loadPrivateKey(at: try required(V.privateKeyPath, "path of the .p8 In-App Purchase key"),
                                                           warnings: &warnings)
        }
        return PromotionalOfferSigner(issuerId: issuerId, keyId: keyId, bundleId: bundleId, privateKey: key)
    }
}

extension PromotionalOfferSigner: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "PromotionalOfferSigner(bundleId: \(bundleId), keyId: \(keyId), key: <redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: []) }
}
