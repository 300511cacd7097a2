import AppStoreModels
import Foundation
import X509

/// `churnwatch inspect`: verifies signed App Store data against the configured roots and shows
/// every decoded field, or asks Apple about one subscription.
///
/// ```swift
/// let inspector = Inspector(configuration: config, client: client)
/// let report = await inspector.inspect(try Inspector.readInput(argument))   // JWS, file or "-"
/// let report = await inspector.inspectSubscription("2000000000000001")      // --otid
/// print(report.json); FileHandle.standardError.write(report.verdictLine + "\n"); exit(report.exitCode)
/// ```
///
/// Accepted input: a compact JWS (transaction, renewal info, notification `signedPayload`, app
/// transaction), or a whole JSON response (Get All Subscription Statuses, Get Transaction
/// History, Get Refund History, Get Transaction Info, a notification `{"signedPayload": ...}`).
/// Each JWS is verified the way the worker verifies it (chain to the configured roots at
/// `signedDate`, Apple's OIDs, ES256, bundle ID, environment). Payloads that fail are shown
/// under `unverifiedPayload`, never as `payload`.
public struct Inspector: Sendable {
    private let verifier: SignedDataVerifier
    private let client: AppStoreServerAPIClient?
    private let bundleId: String
    private let appAppleId: Int64?
    /// The environment payloads must name.
    public let environment: AppStoreEnvironment

    /// - Parameters:
    ///   - environment: the environment payloads must name; the configured one by default.
    ///   - client: needed only for ``inspectSubscription(_:)``.
    public init(configuration: AppStoreConfiguration, environment: AppStoreEnvironment? = nil, client: AppStoreServerAPIClient? = nil) {
        self.init(verification: configuration.verificationSettings, environment: environment, client: client)
    }

    /// An inspector of signed data alone (no key, no calls to Apple: ``inspectSubscription(_:)``
    /// answers that it needs a client).
    public init(verification: AppStoreVerificationSettings, environment: AppStoreEnvironment? = nil, client: AppStoreServerAPIClient? = nil) {
        self.verifier = client?.verifier ?? SignedDataVerifier(
            rootCertificates: verification.rootCertificates, bundleId: verification.bundleId,
            options: .init(strictX509: verification.strictX509))
        self.client = client
        self.bundleId = verification.bundleId
        self.appAppleId = verification.appAppleId
        self.environment = environment ?? verification.environment
    }

    /// The text to inspect from a command-line argument: `-` reads standard input, an existing
    /// file is read, anything else is taken as the JWS or JSON itself.
    public static func readInput(_ argument: String, standardInput: () -> Data = { FileHandle.standardInput.readDataToEndOfFile() }) throws -> String {
        let data: Data
        if argument == "-" {
            data = standardInput()
        } else if FileManager.default.fileExists(atPath: argument) {
            data = try Data(contentsOf: URL(fileURLWithPath: argument))
        } else {
            return argument
        }
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: Signed data and responses

    /// Verifies a JWS or a response document and reports every decoded field.
    public func inspect(_ input: String) async -> InspectionReport {
        var text = input.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2, let s = try? JSONDecoder().decode(String.self, from: Data(text.utf8)) {
            text = s
        }
        var report = Builder()
        if text.hasPrefix("{") {
            guard let json = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)), case .object(let object) = json else {
                return report.finish(failure: "input is not a JSON object", kind: "unknown")
            }
            return await inspectDocument(object, json: json, report: &report)
        }
        await report.add(verifyItem(text, path: "$", expected: nil))
        return report.finish(kind: "jws")
    }

    private func inspectDocument(_ object: [String: JSONValue], json: JSONValue, report: inout Builder) async -> InspectionReport {
        let data = Data((try? JSONEncoder().encode(json)) ?? Data())
        report.document["response"] = .object(object.filter { !["data", "signedTransactions", "signedTransactionInfo", "signedPayload"].contains($0.key) })
        if object["data"] != nil, let status = try? JSONDecoder().decode(StatusResponse.self, from: data) {
            for (g, group) in (status.data ?? []).enumerated() {
                for (i, item) in (group.lastTransactions ?? []).enumerated() {
                    let base = "data[\(g)].lastTransactions[\(i)]"
                    guard let t = item.signedTransactionInfo else {
                        report.fail("\(base): no signedTransactionInfo")
                        continue
                    }
                    let transaction = await verifyItem(t, path: "\(base).signedTransactionInfo", expected: .transaction)
                    report.add(transaction)
                    if let r = item.signedRenewalInfo {
                        let renewal = await verifyItem(r, path: "\(base).signedRenewalInfo", expected: .renewalInfo)
                        report.add(renewal)
                        if transaction.verified, renewal.verified, let item = item.originalTransactionId,
                           transaction.originalTransactionId != item || renewal.originalTransactionId != item {
                            report.fail("\(base): signed originalTransactionId does not match the item's \(item)")
                        }
                    }
                }
            }
            return report.finish(kind: "statusResponse")
        }
        if let signed = object["signedTransactions"] {
            guard case .array(let items) = signed else { return report.finish(failure: "signedTransactions is not an array", kind: "unknown") }
            for (i, item) in items.enumerated() {
                guard case .string(let jws) = item else {
                    report.fail("signedTransactions[\(i)] is not a string")
                    continue
                }
                await report.add(verifyItem(jws, path: "signedTransactions[\(i)]", expected: .transaction))
            }
            return report.finish(kind: object["bundleId"] != nil || object["appAppleId"] != nil ? "historyResponse" : "refundHistoryResponse")
        }
        if case .string(let jws)? = object["signedTransactionInfo"] {
            await report.add(verifyItem(jws, path: "signedTransactionInfo", expected: .transaction))
            return report.finish(kind: "transactionInfoResponse")
        }
        if case .string(let jws)? = object["signedPayload"] {
            await report.add(verifyItem(jws, path: "signedPayload", expected: .notification))
            return report.finish(kind: "notification")
        }
        return report.finish(failure: "no signed data found (expected a JWS or an App Store Server API response)", kind: "unknown")
    }

    enum PayloadType: String {
        case transaction, renewalInfo, notification, appTransaction
    }

    struct ItemResult {
        var json: JSONValue
        var verified: Bool
        var reason: String?
        var originalTransactionId: String?
        var nested: [ItemResult] = []
    }

    /// Verifies one JWS as `expected` (detected from its fields when nil).
    func verifyItem(_ jws: String, path: String, expected: PayloadType?) async -> ItemResult {
        var entry: [String: JSONValue] = ["path": .string(path)]
        let parsed = try? CompactJWS(jws, maxHeaderBytes: .max)
        let rawPayload = parsed.flatMap { try? $0.decodePayload(JSONValue.self) }
        if let header = parsed.flatMap({ try? $0.decodeHeader() }) { entry["header"] = Self.describe(header) }
        let type = expected ?? Self.detect(rawPayload)
        entry["type"] = .string(type?.rawValue ?? "unknown")

        var failure: JWSVerificationFailure?
        var extra: String?
        var nested: [ItemResult] = []
        var originalTransactionId: String?
        do {
            switch type {
            case .transaction?:
                originalTransactionId = try await verifier.verifyTransaction(jws, environment: environment).originalTransactionId
            case .renewalInfo?:
                originalTransactionId = try await verifier.verifyRenewalInfo(jws, environment: environment).originalTransactionId
            case .notification?:
                let payload = try await verifier.verify(jws, as: GenericSignedPayload.self)
                extra = checkNotification(payload)
                if extra == nil, case .object(let o) = payload.json, case .object(let data)? = o["data"] {
                    if case .string(let t)? = data["signedTransactionInfo"] {
                        nested.append(await verifyItem(t, path: "\(path).data.signedTransactionInfo", expected: .transaction))
                    }
                    if case .string(let r)? = data["signedRenewalInfo"] {
                        nested.append(await verifyItem(r, path: "\(path).data.signedRenewalInfo", expected: .renewalInfo))
                    }
                }
            case .appTransaction?:
                let payload = try await verifier.verify(jws, as: GenericSignedPayload.self)
                extra = checkAppTransaction(payload)
            case nil:
                _ = try await verifier.verify(jws, as: GenericSignedPayload.self)
                extra = "unrecognized signed payload: bundle ID and environment cannot be checked"
            }
        } catch {
            failure = error
        }

        let verified = failure == nil && extra == nil
        entry["verified"] = .bool(verified)
        if let failure {
            entry["reason"] = .string(failure.description)
            entry["appleStatus"] = .string(failure.appleStatus)
        } else if let extra {
            entry["reason"] = .string(extra)
        }
        if let rawPayload {
            entry[verified ? "payload" : "unverifiedPayload"] = rawPayload
            if let dates = Self.dates(rawPayload) { entry["dates"] = dates }
        }
        let reason = failure.map { "\(path): \($0)" } ?? extra.map { "\(path): \($0)" }
        return ItemResult(json: .object(entry), verified: verified, reason: reason, originalTransactionId: originalTransactionId, nested: nested)
    }

    /// Apple's notification checks: bundle ID, app Apple ID in Production, environment.
    private func checkNotification(_ payload: GenericSignedPayload) -> String? {
        guard case .object(let o) = payload.json else { return "payload is not an object" }
        var bundle: String?, appId: Int64?, env: String?
        for key in ["data", "summary", "appData"] {
            if case .object(let d)? = o[key] {
                if case .string(let b)? = d["bundleId"] { bundle = b }
                if case .integer(let a)? = d["appAppleId"] { appId = a }
                if case .string(let e)? = d["environment"] { env = e }
                break
            }
        }
        if bundle == nil, case .object(let d)? = o["externalPurchaseToken"] {
            if case .string(let b)? = d["bundleId"] { bundle = b }
            if case .integer(let a)? = d["appAppleId"] { appId = a }
            if case .string(let id)? = d["externalPurchaseId"], id.hasPrefix("SANDBOX") { env = "Sandbox" } else { env = "Production" }
        }
        if bundle != bundleId || (environment == .production && appId != appAppleId) {
            return JWSVerificationFailure.bundleIdMismatch(expected: bundleId, actual: bundle).description
                + (environment == .production && appId != appAppleId ? " or appAppleId \(appId.map(String.init) ?? "(none)") is not \(appAppleId.map(String.init) ?? "(none)")" : "")
        }
        if env != environment.rawValue {
            return JWSVerificationFailure.environmentMismatch(expected: environment.rawValue, actual: env).description
        }
        return nil
    }

    /// Apple's app-transaction checks: bundle ID, app Apple ID in Production, `receiptType`.
    private func checkAppTransaction(_ payload: GenericSignedPayload) -> String? {
        if payload.string("bundleId") != bundleId || (environment == .production && payload.integer("appAppleId") != appAppleId) {
            return "bundleId or appAppleId is not the configured app"
        }
        if payload.string("receiptType") != environment.rawValue {
            return JWSVerificationFailure.environmentMismatch(expected: environment.rawValue, actual: payload.string("receiptType")).description
        }
        return nil
    }

    static func detect(_ payload: JSONValue?) -> PayloadType? {
        guard case .object(let o)? = payload else { return nil }
        if o["notificationType"] != nil { return .notification }
        if o["receiptType"] != nil && o["transactionId"] == nil { return .appTransaction }
        if o["transactionId"] != nil || o["bundleId"] != nil { return .transaction }
        if o["autoRenewStatus"] != nil || o["autoRenewProductId"] != nil || o["renewalDate"] != nil { return .renewalInfo }
        return nil
    }

    /// The header with certificates shown by subject instead of Base64.
    static func describe(_ header: JWSHeader) -> JSONValue {
        var h: [String: JSONValue] = [:]
        if let alg = header.alg { h["alg"] = .string(alg) }
        if let kid = header.kid { h["kid"] = .string(String(kid.prefix(200))) }
        if let typ = header.typ { h["typ"] = .string(typ) }
        if let x5c = header.x5c {
            h["x5c"] = .array(x5c.prefix(10).map { b64 in
                guard let der = Base64URL.decodeStandard(b64), let cert = try? Certificate(derEncoded: der) else { return .string("(not a certificate)") }
                return .object([
                    "subject": .string(cert.subject.description), "issuer": .string(cert.issuer.description),
                    "notValidBefore": .string(iso(cert.notValidBefore)), "notValidAfter": .string(iso(cert.notValidAfter)),
                ])
            })
        }
        return .object(h)
    }

    /// ISO 8601 renderings of the payload's `...Date` fields, for reading.
    static func dates(_ payload: JSONValue) -> JSONValue? {
        guard case .object(let o) = payload else { return nil }
        var dates: [String: JSONValue] = [:]
        for (key, value) in o where key.hasSuffix("Date") {
            if case .integer(let ms) = value { dates[key] = .string(iso(Date(timeIntervalSince1970: Double(ms) / 1000))) }
        }
        return dates.isEmpty ? nil : .object(dates)
    }

    static func iso(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }

    // MARK: Asking Apple

    /// `inspect --otid`: Get All Subscription Statuses (falling back to the other environment on
    /// 4040010) and the full transaction history, decoded. Writes nothing.
    public func inspectSubscription(_ transactionId: String) async -> InspectionReport {
        var report = Builder()
        report.document["transactionId"] = .string(transactionId)
        guard let client else { return report.finish(failure: "no App Store client configured", kind: "subscription") }
        let (status, env) = await client.withEnvironmentFallback(startingWith: environment) {
            await client.subscriptionStatuses(for: transactionId, environment: $0)
        }
        report.document["environment"] = .string(env.rawValue)
        guard case .success(let statuses) = status else { return report.finish(outcome: status, kind: "subscription", what: "status") }
        var subscriptions: [JSONValue] = []
        for s in statuses.subscriptions {
            var entry: [String: JSONValue] = [
                "status": s.rawStatus.map { .integer(Int64($0)) } ?? .null,
                "statusName": .string(s.status.map { "\($0)" } ?? "unknown"),
                "originalTransactionId": s.originalTransactionId.map(JSONValue.string) ?? .null,
            ]
            entry["transaction"] = Self.verifiedPayload(s.signedTransactionInfo)
            if let r = s.signedRenewalInfo { entry["renewalInfo"] = Self.verifiedPayload(r) }
            subscriptions.append(.object(entry))
            report.signed += s.signedRenewalInfo == nil ? 1 : 2
        }
        report.document["subscriptions"] = .array(subscriptions)
        for r in statuses.rejected {
            report.fail("status: the item of \(r.originalTransactionId ?? "an unnamed subscription") failed verification: \(r.failure)")
        }

        let history = await client.transactionHistory(for: transactionId, environment: env)
        guard case .success(let h) = history else { return report.finish(outcome: history, kind: "subscription", what: "history") }
        report.document["history"] = .object([
            "pages": .integer(Int64(h.pages)), "revision": h.revision.map(JSONValue.string) ?? .null,
            "transactions": .array(h.signedTransactions.map(Self.verifiedPayload)),
        ])
        report.signed += h.signedTransactions.count
        return report.finish(kind: "subscription")
    }

    /// The payload of a JWS the client has already verified, with readable dates.
    static func verifiedPayload(_ jws: String) -> JSONValue {
        guard let payload = try? CompactJWS(jws, maxHeaderBytes: .max).decodePayload(JSONValue.self) else { return .null }
        guard let dates = dates(payload) else { return .object(["payload": payload]) }
        return .object(["payload": payload, "dates": dates])
    }

    /// Accumulates items and the first failure.
    struct Builder {
        var document: [String: JSONValue] = [:]
        var items: [JSONValue] = []
        var firstFailure: String?
        var signed = 0

        mutating func add(_ item: ItemResult) {
            items.append(item.json)
            signed += 1
            if !item.verified, firstFailure == nil { firstFailure = item.reason }
            for n in item.nested { add(n) }
        }

        mutating func fail(_ reason: String) {
            if firstFailure == nil { firstFailure = reason }
        }

        func finish(kind: String) -> InspectionReport {
            var doc = document
            doc["kind"] = .string(kind)
            if !items.isEmpty { doc["signedData"] = .array(items) }
            doc["signedPayloads"] = .integer(Int64(signed))
            if let firstFailure { return make(doc, .rejected, firstFailure, 1) }
            if signed == 0 { return make(doc, .rejected, "no signed payload to verify", 1) }
            return make(doc, .verified, nil, 0)
        }

        func finish(failure: String, kind: String) -> InspectionReport {
            var b = self
            b.fail(failure)
            return b.finish(kind: kind)
        }

        func finish<T>(outcome: AppStoreOutcome<T>, kind: String, what: String) -> InspectionReport {
            var doc = document
            doc["kind"] = .string(kind)
            doc["signedPayloads"] = .integer(Int64(signed))
            let reason = "\(what): \(outcome)"
            switch outcome {
            case .success: return finish(kind: kind)
            case .notFound: return make(doc, .notFound, reason, 1)
            case .rateLimited, .retryable, .untrustedServer: return make(doc, .unavailable, reason, 69)
            case .unauthorized: return make(doc, .unavailable, reason, 78)
            case .badRequest, .verificationFailed, .malformedResponse: return make(doc, .rejected, reason, 1)
            }
        }

        private func make(_ doc: [String: JSONValue], _ verdict: InspectionReport.Verdict, _ reason: String?, _ code: Int32) -> InspectionReport {
            var doc = doc
            doc["verdict"] = .string(verdict.rawValue)
            if let reason { doc["reason"] = .string(reason) }
            return InspectionReport(verdict: verdict, reason: reason, document: .object(doc), exitCode: code)
        }
    }
}
