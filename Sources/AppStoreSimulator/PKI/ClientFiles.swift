import Foundation

/// The files a user of the simulator needs besides the PKI: `churnwatch.env` (every APPSTORE_*
/// setting, pointing at this simulator) and `subscriptions.csv` (for `churnwatch import`).
public enum ClientFiles {
    /// Writes `churnwatch.env` and `subscriptions.csv` into `dir` (which holds the identity).
    public static func write(
        dir: String, identity: SimulatorIdentity, population: Population, productionPort: Int, sandboxPort: Int,
        environment: SimEnvironment
    ) throws {
        let url = URL(fileURLWithPath: dir, isDirectory: true).standardizedFileURL
        let abs = url.path
        let lines = [
            "APPSTORE_ISSUER_ID=\(identity.issuerId)",
            "APPSTORE_KEY_ID=\(identity.keyId)",
            "APPSTORE_PRIVATE_KEY_PATH=\(abs)/\(identity.apiKeyFileName)",
            "APPSTORE_BUNDLE_ID=\(population.config.bundleId)",
            "APPSTORE_APP_APPLE_ID=\(population.config.appAppleId)",
            "APPSTORE_ENVIRONMENT=\(environment.rawValue)",
            "APPSTORE_BASE_URL=http://127.0.0.1:\(productionPort)",
            "APPSTORE_SANDBOX_BASE_URL=http://127.0.0.1:\(sandboxPort)",
            "APPSTORE_ROOT_CERTS=\(abs)/root.der",
            "APPSTORE_SHARED_SECRET=\(identity.sharedSecret)",
        ]
        try FileIO.write(Array((lines.joined(separator: "\n") + "\n").utf8), to: url.appendingPathComponent("churnwatch.env"), mode: 0o600)
        try FileIO.write(csv(population), to: url.appendingPathComponent("subscriptions.csv"), mode: 0o644)
    }

    /// `churnwatch import` CSV: original_transaction_id,app_account_token,customer_ref,environment,receipt_data.
    public static func csv(_ population: Population) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(population.count * 90)
        out.append(contentsOf: "original_transaction_id,app_account_token,customer_ref,environment,receipt_data\n".utf8)
        for i in 0..<population.count {
            let row = [
                population.originalTransactionId(i), population.appAccountToken(i) ?? "",
                population.customerRef(i) ?? "", population.environment(i), population.receiptData(i) ?? "",
            ].joined(separator: ",")
            out.append(contentsOf: row.utf8)
            out.append(10)
        }
        return out
    }
}
