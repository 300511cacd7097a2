import AppStoreServerAPI
import ChurnServe
import ChurnStore
import Foundation
import Logging
import NIOSSL
import Polling
import Synchronization

/// `serve`'s settings, checked before anything is opened.
struct ServeSettings {
    var host: String
    var port: Int
    var limits: DoorLimits
    var tls: NIOSSLContext?
    var storeWithin: Duration
    var answerWithin: Duration
    var retentionMaxSkew: Duration?
    var grace: Duration
}

extension ServeCommand {
    func validated() throws -> ServeSettings {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65_535).contains(port),
              colon > listen.startIndex else {
            throw CLIError.configuration("--listen \(listen) is not HOST:PORT (e.g. 127.0.0.1:8080, or 0.0.0.0:8443)")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var limits = DoorLimits()
        guard (1024...(16 << 20)).contains(maxBody) else { throw CLIError.configuration("--max-body \(maxBody) is out of range: give 1024 to 16777216 bytes") }
        guard (1...100_000).contains(maxConnections) else { throw CLIError.configuration("--max-connections \(maxConnections) is out of range: give 1 to 100000") }
        limits.maxBody = maxBody
        limits.maxConnections = maxConnections
        limits.headerTimeout = .seconds(try parseDurationSetting("--header-timeout", headerTimeout, positive: true))
        limits.bodyTimeout = .seconds(try parseDurationSetting("--body-timeout", bodyTimeout, positive: true))
        var tls: NIOSSLContext?
        switch (tlsCert, tlsKey) {
        case (nil, nil): tls = nil
        case (let cert?, let key?):
            do { tls = try HTTPDoor.tlsContext(certificateFile: cert, keyFile: key) } catch {
                throw CLIError.configuration("--tls-cert \(cert) / --tls-key \(key) cannot be used: \(error) (PEM files: the chain, leaf first, and its key)")
            }
        default: throw CLIError.configuration("--tls-cert and --tls-key go together: give both for HTTPS, or neither behind a TLS proxy")
        }
        return ServeSettings(host: host, port: port, limits: limits, tls: tls,
                             storeWithin: .seconds(try parseDurationSetting("--store-within", storeWithin, positive: true)),
                             answerWithin: try answerBudget(),
                             retentionMaxSkew: retentionMaxSkew == "off" ? nil
                                 : .seconds(try parseDurationSetting("--retention-max-skew", retentionMaxSkew, positive: true)),
                             grace: .seconds(try parseDurationSetting("--shutdown-grace", shutdownGrace)))
    }
}

extension ServeCommand {
    /// `--answer-within`: 20 ms to 5 s (Apple waits about 700 ms).
    func answerBudget() throws -> Duration {
        let seconds = try parseDurationSetting("--answer-within", answerWithin, positive: true)
        guard (0.02...5).contains(seconds) else {
            throw CLIError.configuration("--answer-within \(answerWithin) is out of range: give 20ms to 5s (Apple shows the default after about 700 ms)")
        }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

/// Each app's verifier (for the door) and feed (for the applier).
enum ServeParts {
    /// An app whose settings cannot be used is named in one log line and answered 503 (Apple
    /// delivers again once the operator fixed them and restarted serve); the others serve.
    static func open(_ apps: [NightSetup.App], url: String, options: FeedOptions, verified: VerifiedCache,
                     logger: Logger) async throws -> ServeApps.Loaded {
        var parts = ServeApps.Loaded()
        for app in apps {
            let name = app.record.bundleId
            switch app.configuration {
            case .failure(let error):
                let line = classify(error).0
                logger.error("this app's settings cannot be used: its notifications are answered 503", metadata: ["bundle_id": "\(name)", "error": "\(line)"])
                parts.doors[name] = .misconfigured(line)
                // The cancel page of an app named by its app Apple id: the same answer (503).
                if let appAppleId = app.record.appAppleId { parts.retention[appAppleId] = .misconfigured(line) }
            case .success(let config):
                var context = try await FeedContext.open(url: url, config: config, options: options, asOf: Date(), logger: logger)
                // Verified by this process's receiver moments ago: not again.
                let own = name.lowercased()
                context.feed.verifiedBefore = { verified.take($0, bundleId: own) }
                // Small batches: the applier runs as rows arrive, and a big batch held in memory
                // at once is what its peak memory is made of.
                context.feed.settings.batchSize = 200
                parts.doors[name] = .open(context.feed)
                parts.appliers.append(InboxApplier.App(store: context.store, feed: context.feed))
                // The cancel page: found by the app Apple id Apple's requests carry (Sandbox too:
                // Apple's performance test runs there).
                if let appAppleId = config.appAppleId {
                    let door = RetentionDoor(client: context.client, store: context.store, signer: PromotionalOfferSigner(configuration: config),
                                             alsoSandbox: true)
                    // Read again at the first request when this fails.
                    try? await door.load()
                    parts.retention[appAppleId] = .open(door)
                }
            }
        }
        return parts
    }
}

/// Once serve's stop began (its group took the first SIGTERM/SIGINT): says so, and another
/// signal exits at once (75; what committed is kept, the rest Apple delivers again).
final class StopAnnouncement: Sendable {
    private let again = Mutex<SignalHandler?>(nil)

    func stopping() {
        FileHandle.standardError.write(Data("churnwatch: stopping: finishing in-flight work (signal again to exit at once)\n".utf8))
        SystemdNotify.send("STOPPING=1")
        again.withLock { $0 = SignalHandler(stopping: false) {} }
    }
}

/// systemd's readiness protocol (`Type=notify`): a datagram to `$NOTIFY_SOCKET`; nothing when unset.
enum SystemdNotify {
    static func send(_ state: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard var path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return }
        if path.hasPrefix("@") { path = "\0" + path.dropFirst() }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                Array(state.utf8).withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, sa, length) }
            }
        }
    }
}
