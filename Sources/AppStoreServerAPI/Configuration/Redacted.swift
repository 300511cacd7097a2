import Crypto

/// The App Store Server API private key. Prints as `<redacted>` wherever it ends up.
public struct AppStoreSigningKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let key: P256.Signing.PrivateKey
    public init(_ key: P256.Signing.PrivateKey) { self.key = key }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

/// A secret string (the verifyReceipt shared secret). Prints as `<redacted>`.
public struct RedactedString: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: []) }
}
