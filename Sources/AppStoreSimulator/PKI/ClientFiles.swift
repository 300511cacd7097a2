import Foundation

/// The files a user of the simulator needs besides the PKI: per app a churnwatch environment file
/// (every APPSTORE_* setting, pointing at this simulator) and a subscriptions CSV (for
/// `churnwatch import`), and `apps.tsv`, the apps served. The first app's are `churnwatch.env`
/// and `subscriptions.csv`; app k's (k ≥ 2) `churnwatch-<bundle id>.env` and
/// `subscriptions-<bundle id>.csv`.
public enum ClientFiles {
    /// One line of `apps.tsv`: bundle_id, app_apple_id, env file, CSV file (tab-separated).
    public struct AppEntry: Sendable, Hashable {
        public var bundleId: String
        public var appAppleId: Int64
        public var envFile: String
        public var csvFile: String
    }

    /// The entry of the app with `population`, the `index`-th served (0 = the first app).
    public static func entry(_ population: Population, index: Int) -> AppEntry {
        let bid = population.config.bundleId
        return AppEntry(
            bundleId: bid, appAppleId: population.config.appAppleId,
            envFile: index == 0 ? "churnwatch.env" : "churnwatch-\(bid).env",
            csvFile: index == 0 ? "subscriptions.csv" : "subscriptions-\(bid).csv")
    }

    /// Writes `churnwatch.env` and `subscriptions.csv` into `dir` (which holds the identity).
    public static func write(
        dir: String, identity: SimulatorIdentity, population: Population, productionPort: Int, sandboxPort: Int,
        environment: SimEnvironment
    ) throws {
        try write(
            dir: dir, identity: identity, populations: [population], productionPort: productionPort,
            sandboxPort: sandboxPort, environment: environment)
    }

    /// Writes every app's environment file and CSV (see ``entry(_:index:)``) and `apps.tsv`, one
    /// line per app in order, into `dir` (which holds the identity).
    public static func write(
        dir: String, identity: SimulatorIdentity, populations: [Population], productionPort: Int, sandboxPort: Int,
        environment: SimEnvironment
    ) throws {
        let url = URL(fileURLWithPath: dir, isDirectory: true).standardizedFileURL
        var tsv = ""
        for (index, population) in populations.enumerated() {
            let e = entry(population, index: index)
            let env = envFile(
                dir: url.path, identity: identity, population: population, productionPort: productionPort,
                sandboxPort: sandboxPort, environment: environment)
            try FileIO.write(env, to: url.appendingPathComponent(e.envFile), mode: 0o600)
            try FileIO.write(csv(population), to: url.appendingPathComponent(e.csvFile), mode: 0o644)
            tsv += "\(e.bundleId)\t\(e.appAppleId)\t\(e.envFile)\t\(e.csvFile)\n"
        }
        try FileIO.write(Array(tsv.utf8), to: url.appendingPathComponent("apps.tsv"), mode: 0o644)
    }

    /// The apps `apps.tsv` in `dir` lists, in order; nil when there is none (or it is not ours).
    public static func apps(dir: String) -> [AppEntry]? {
        let url = URL(fileURLWithPath: dir, isDirectory: true).appendingPathComponent("apps.tsv")
        guard let bytes = FileIO.read(url) else { return nil }
        var entries: [AppEntry] = []
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard f.count == 4, let id = Int64(f[1]) else { return nil }
            entries.append(AppEntry(bundleId: f[0], appAppleId: id, envFile: f[2], csvFile: f[3]))
        }
        return entries
    }

    /// An environment file: every APPSTORE_* setting of one app, pointing at this simulator.
    static func envFile(
        dir abs: String, identity: SimulatorIdentity, population: Population, productionPort: Int, sandboxPort: Int,
        environment: SimEnvironment
    ) -> [UInt8] {
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
        return Array((lines.joined(separator: "\n") + "\n").utf8)
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
