import AppStoreModels

/// A payload Apple signs as a compact JWS. `signedDateMilliseconds` is the validation time of the
/// certificate chain (Apple's libraries in offline mode: `signedDate`, else
/// `receiptCreationDate`, else now).
public protocol SignedPayload: Decodable, Sendable {
    var signedDateMilliseconds: Int64? { get }
}

extension JWSTransactionDecodedPayload: SignedPayload {
    public var signedDateMilliseconds: Int64? { signedDate?.rawValue }
}

extension JWSRenewalInfoDecodedPayload: SignedPayload {
    public var signedDateMilliseconds: Int64? { signedDate?.rawValue }
}

/// Any signed payload kept as JSON, with the dates and identifiers the verifier checks.
/// Used for payloads churnwatch does not model (notifications, app transactions) and by
/// ``Inspector``.
public struct GenericSignedPayload: SignedPayload, Hashable {
    public let json: JSONValue
    public var signedDateMilliseconds: Int64? {
        integer("signedDate") ?? integer("receiptCreationDate")
    }

    public init(from decoder: any Decoder) throws {
        json = try JSONValue(from: decoder)
        guard case .object = json else {
            throw DecodingError.typeMismatch(JSONValue.self, .init(codingPath: [], debugDescription: "payload is not an object"))
        }
    }

    /// A top-level integer member.
    public func integer(_ key: String) -> Int64? {
        guard case .object(let o) = json, case .integer(let v)? = o[key] else { return nil }
        return v
    }

    /// A top-level string member.
    public func string(_ key: String) -> String? {
        guard case .object(let o) = json, case .string(let v)? = o[key] else { return nil }
        return v
    }
}
