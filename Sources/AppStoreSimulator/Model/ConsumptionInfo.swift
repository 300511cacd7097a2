import Foundation

/// The body of Send Consumption Information (`PUT /inApps/v2/transactions/consumption/{id}`),
/// validated as Apple does (docs/simulator.md, "Refund requests"). Parsed here, independently of
/// churnwatch's wire models.
public struct ConsumptionInfo: Sendable, Hashable {
    public var customerConsented: Bool
    public var sampleContentProvided: Bool
    /// `DELIVERED` or one of the `UNDELIVERED_*` values.
    public var deliveryStatus: String
    /// Milliunits, 0...100000; nil when absent.
    public var consumptionPercentage: Int64?
    /// `DECLINE`, `GRANT_FULL` or `GRANT_PRORATED`; nil when absent.
    public var refundPreference: String?

    public static let deliveryStatuses: Set<String> = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER",
    ]
    public static let refundPreferences: Set<String> = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]

    public init(
        customerConsented: Bool, sampleContentProvided: Bool, deliveryStatus: String, consumptionPercentage: Int64? = nil,
        refundPreference: String? = nil
    ) {
        self.customerConsented = customerConsented
        self.sampleContentProvided = sampleContentProvided
        self.deliveryStatus = deliveryStatus
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }

    /// One JSON value of the body, as far as the checks need to tell them apart.
    private enum Field: Decodable {
        case bool(Bool)
        case int(Int64)
        case string(String)
        case null
        case other

        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if c.decodeNil() {
                self = .null
            } else if let b = try? c.decode(Bool.self) {
                self = .bool(b)
            } else if let n = try? c.decode(Int64.self) {
                self = .int(n)
            } else if let s = try? c.decode(String.self) {
                self = .string(s)
            } else {
                self = .other
            }
        }
    }

    /// Parses and checks a body; throws Apple's 400 errors: not a JSON object `4000000`,
    /// `customerConsented` not `true` `4000035`, `sampleContentProvided` not a boolean `4000041`,
    /// `deliveryStatus` not one of Apple's `4000036`, a bad `consumptionPercentage` or
    /// `refundPreference` `4000000`.
    public static func parse(_ body: [UInt8]) throws(AppleError) -> ConsumptionInfo {
        guard let json = try? JSONDecoder().decode([String: Field].self, from: Data(body)) else { throw .badRequest }
        guard case .bool(true)? = json["customerConsented"] else { throw .invalidCustomerConsented }
        guard case .bool(let sample)? = json["sampleContentProvided"] else { throw .invalidSampleContentProvided }
        guard case .string(let delivery)? = json["deliveryStatus"], deliveryStatuses.contains(delivery) else {
            throw .invalidDeliveryStatus
        }
        var info = ConsumptionInfo(customerConsented: true, sampleContentProvided: sample, deliveryStatus: delivery)
        switch json["refundPreference"] {
        case nil, .null?: break
        case .string(let p)? where refundPreferences.contains(p): info.refundPreference = p
        default: throw .badRequest
        }
        switch json["consumptionPercentage"] {
        case nil, .null?: break
        case .int(let n)? where (0...100_000).contains(n): info.consumptionPercentage = n
        default: throw .badRequest
        }
        if let n = info.consumptionPercentage {
            // Only a delivered purchase is consumed; a prorated refund of a subscription is
            // computed by Apple, so no percentage goes with it.
            guard delivery == "DELIVERED" || n == 0, info.refundPreference != "GRANT_PRORATED" else { throw .badRequest }
        }
        return info
    }

    /// The fields as an object (absent optional fields left out), with Apple's names.
    func write(_ key: String, to w: inout JSONWriter) {
        w.beginObject(key)
        w.bool("customerConsented", customerConsented)
        w.bool("sampleContentProvided", sampleContentProvided)
        w.string("deliveryStatus", deliveryStatus)
        if let consumptionPercentage { w.int("consumptionPercentage", consumptionPercentage) }
        if let refundPreference { w.string("refundPreference", refundPreference) }
        w.endObject()
    }
}

extension AppleError {
    public static let badRequest = AppleError(400, 4_000_000, "Bad request.")
    public static let invalidCustomerConsented = AppleError(400, 4_000_035, "Invalid customer consented.")
    public static let invalidDeliveryStatus = AppleError(400, 4_000_036, "Invalid delivery status.")
    public static let invalidSampleContentProvided = AppleError(400, 4_000_041, "Invalid sample content provided.")
}
