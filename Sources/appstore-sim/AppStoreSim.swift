import AppStoreSimulator
import ArgumentParser
import Foundation

@main
struct AppStoreSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore-sim",
        abstract: "A local App Store Server API: a simulated subscriber population, a simulated clock, Apple's limits and faults, and ground truth.",
        subcommands: [Serve.self, Token.self, Bench.self])
}

/// Options that define the population (shared by serve and bench).
struct PopulationOptions: ParsableArguments {
    @Option(help: "Number of subscriptions (one originalTransactionId each).")
    var subscribers = 1000

    @Option(help: "Seed of the population: the same seed gives the same subscribers and answers.")
    var seed: UInt64 = 1

    @Option(help: "Simulated start time (ISO 8601); every first purchase is before it.")
    var start = "2026-01-01T00:00:00Z"

    @Option(help: "Days after --start for which timelines are generated.")
    var horizonDays = 400

    @Option(help: "Share of customers in the Sandbox environment (served on --sandbox-port).")
    var sandboxShare = 0.03

    @Option(help: "Share of billing failures that get a Billing Grace Period (3, 16 or 28 days).")
    var graceShare = 0.5

    @Option(help: "Share of customers with legacy receipt data (verifyReceipt).")
    var receiptShare = 0.10

    @Option(help: "Share of refunds preceded by a refund request (CONSUMPTION_REQUEST), 14-60 h before the refund.")
    var consumptionRequestShare = 0.6

    @Option(help: "Probability per paid period of a refund request that Apple declines (CONSUMPTION_REQUEST, then REFUND_DECLINED 14-60 h later).")
    var refundDeclinedRate = 0.004

    @Option(help: "The app's bundle id (the JWT bid claim and payload bundleId).")
    var bundleId = "com.example.churnwatch"

    @Option(help: "The app's Apple ID (appAppleId).")
    var appAppleId: Int64 = 1_234_567_890

    @Option(help: "Production (a Sandbox share per --sandbox-share) or Sandbox (every subscriber in Sandbox).")
    var environment = "Production"

    func config() throws -> PopulationConfig {
        guard let t = SimTime.parse(start) else { throw ValidationError("--start: not an ISO 8601 time: \(start)") }
        guard subscribers >= 1, subscribers <= 10_000_000 else { throw ValidationError("--subscribers: 1 to 10,000,000") }
        guard environment == "Production" || environment == "Sandbox" else {
            throw ValidationError("--environment: Production or Sandbox")
        }
        for (name, v) in [("--consumption-request-share", consumptionRequestShare), ("--refund-declined-rate", refundDeclinedRate)]
        where !(0...1).contains(v) {
            throw ValidationError("\(name): a probability from 0 to 1, got \(v)")
        }
        var c = PopulationConfig(subscribers: subscribers, seed: seed, start: t)
        c.consumptionRequestShare = consumptionRequestShare
        c.refundDeclinedRate = refundDeclinedRate
        c.horizonDays = horizonDays
        c.sandboxShare = sandboxShare
        c.graceShare = graceShare
        c.receiptShare = receiptShare
        c.bundleId = bundleId
        c.appAppleId = appAppleId
        c.allSandbox = environment == "Sandbox"
        return c
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve Apple's endpoints and /_sim/* on 127.0.0.1.",
        discussion: """
            Endpoints: GET /inApps/v1/subscriptions/{id}, /inApps/v2/history/{id}, /inApps/v1/transactions/{id}, \
            /inApps/v2/refund/lookup/{id}, POST /inApps/v1/notifications/history, \
            PUT /inApps/v2/transactions/consumption/{id} (ES256 JWT required), POST /verifyReceipt; \
            GET /_sim/clock, POST /_sim/clock?advance=1d|?set=ISO, GET /_sim/stats, /_sim/truth?at=ISO, /_sim/truth/consumption, \
            /_sim/events?from=ISO&to=ISO, /_sim/notifications?from=ISO&to=ISO, /_sim/info; \
            Retention Messaging: PUT|DELETE /inApps/v1/messaging/image/{id}, GET .../image/list, PUT|DELETE .../message/{id}, \
            GET .../message/list, PUT|GET|DELETE .../default/{productId}/{locale}, PUT|GET|DELETE .../realtime/url, \
            POST .../performanceTest, GET .../performanceTest/result/{requestId}; GET /_sim/retention/views?from=ISO&to=ISO, \
            /_sim/retention/summary, /_sim/retention/potential. \
            With --apps N: the token's bid picks the app; /_sim endpoints take ?bundle_id= (default: the first app).
            """)

    @OptionGroup var population: PopulationOptions

    @Option(help: "Number of apps served under the one team key: app 1 is --bundle-id, app k (k >= 2) is <bundle-id>.app<k> with its own --subscribers subscribers (seed derived from --seed and k), app Apple id --app-apple-id + k - 1 and files churnwatch-<bundle id>.env and subscriptions-<bundle id>.csv; apps.tsv lists them.")
    var apps = 1

    @Option(help: "Port of the Production host (0 picks a free port).")
    var port = 9980

    @Option(help: "Port of the Sandbox host (default: --port + 1, or a free port with --port 0).")
    var sandboxPort: Int?

    @Option(help: "Directory for root.der, AuthKey_<KEYID>.p8, churnwatch.env, subscriptions.csv and the PKI keys; reused when it exists.")
    var pkiDir = "appstore-sim-pki"

    @Option(help: "Clock speed: 0 moves only through POST /_sim/clock; N runs N simulated seconds per real second.")
    var speed = 0.0

    @Option(help: "Requests per second per endpoint and environment (token bucket); unlimited when absent.")
    var rate: Double?

    @Option(help: "Token bucket size (default: --rate). Apple's hourly enforcement: rate × 3600.")
    var burst: Double?

    @Option(help: "Latency added to every /inApps answer, in milliseconds.")
    var latencyMs = 0

    @Option(help: "Uniform jitter added to --latency-ms, in milliseconds.")
    var latencyJitterMs = 0

    @Option(help: "Probability of a 500 with errorCode 5000001 per /inApps request.")
    var errorRate = 0.0

    @Option(help: "Probability that an /inApps request is never answered (held, then closed after --timeout-hold-ms).")
    var timeoutRate = 0.0

    @Option(help: "Probability that an /inApps request's connection is closed without an answer.")
    var dropRate = 0.0

    @Option(help: "Milliseconds a 'timeout' holds the connection before closing it.")
    var timeoutHoldMs = 120_000

    @Option(help: "Share of subscribers whose payloads carry a fault (rogue chain, truncated JWS, unknown values, foreign bundle).")
    var faultRate = 0.0

    @Option(help: "Comma-separated fault kinds to use: rogue_chain,truncated_jws,unknown_values,foreign_bundle.")
    var faultKinds = PayloadFault.allCases.map(\.rawValue).joined(separator: ",")

    @Option(help: "Probability that a customer with auto-renew off who redeems a save offer (POST /_sim/offers/redeem) is saved: auto-renew back on, renewing from then on.")
    var offerEffect = 0.0

    @Option(help: "Probability per offer identifier that a redemption naming it (offer_id) saves: OFFER_A=0.2,OFFER_B=0.35; others use --offer-effect. The same draw for every offer.")
    var offerEffectBy = ""

    @Option(help: "Probability that an answer in time to a refund request (PUT /inApps/v2/transactions/consumption/{id}) turns Apple's decision its refundPreference's way (drawn once per request).")
    var consumptionAnswerEffect = 0.5

    @Option(help: "Subscribers whose signed status is cached (about 1.3 KB each).")
    var cacheCapacity = 120_000

    @OptionGroup var notifications: NotificationFlags

    @OptionGroup var retention: RetentionFlags

    @Option(help: "Event loop threads (default: one per core).")
    var threads: Int?

    @Flag(help: "Reject bearer tokens without iat (401). Apple accepts them (its Python library sends none); for tests of churnwatch's own tokens.")
    var requireIat = false

    func run() async throws {
        let config = try population.config()
        var options = SimulatorOptions()
        options.rate = rate
        options.burst = burst
        options.latencyMs = latencyMs
        options.latencyJitterMs = latencyJitterMs
        options.errorRate = errorRate
        options.timeoutRate = timeoutRate
        options.dropRate = dropRate
        options.timeoutHoldMs = timeoutHoldMs
        options.faultRate = faultRate
        options.cacheCapacity = cacheCapacity
        guard (0...1).contains(offerEffect) else { throw ValidationError("--offer-effect wants a probability from 0 to 1") }
        options.offerEffect = offerEffect
        do { options.offerEffectByOffer = try OfferRedemption.parseEffects(offerEffectBy) } catch {
            throw ValidationError("--offer-effect-by: \(error.reason)")
        }
        guard (0...1).contains(consumptionAnswerEffect) else {
            throw ValidationError("--consumption-answer-effect wants a probability from 0 to 1")
        }
        options.consumptionAnswerEffect = consumptionAnswerEffect
        options.requireIssuedAt = requireIat
        options.notifications = try notifications.options()
        options.retention = try retention.options()
        let deliveryOptions = try notifications.delivery()
        options.faultKinds = try faultKinds.split(separator: ",").map {
            guard let k = PayloadFault(rawValue: String($0)) else { throw ValidationError("--fault-kinds: unknown kind \($0)") }
            return k
        }
        guard (1...100).contains(apps) else { throw ValidationError("--apps \(apps): the number of apps served is 1 to 100 (e.g. --apps 2)") }
        let identity = try SimulatorIdentity.loadOrCreate(dir: pkiDir)
        let pops = (1...apps).map { Population(config: config.forApp($0)) }
        let pop = pops[0]
        let clock = SimClock(start: config.start, speed: speed)
        let service = SimulatorService(populations: pops, identity: identity, clock: clock, options: options)
        let server = try await SimulatorServer.start(
            service: service, port: port, sandboxPort: sandboxPort, threads: threads ?? ProcessInfo.processInfo.activeProcessorCount)
        try ClientFiles.write(
            dir: pkiDir, identity: identity, populations: pops, productionPort: server.productionPort,
            sandboxPort: server.sandboxPort, environment: config.allSandbox ? .sandbox : .production)
        let dir = URL(fileURLWithPath: pkiDir).standardizedFileURL.path
        say("appstore-sim: \(pop.count) subscriptions (seed \(config.seed)), clock \(SimTime.format(clock.now()))")
        for (k, p) in pops.enumerated().dropFirst() {
            let e = ClientFiles.entry(p, index: k)
            say("appstore-sim: app \(k + 1) \(e.bundleId) (app Apple id \(e.appAppleId)): \(p.count) subscriptions, \(dir)/\(e.envFile)")
        }
        say("appstore-sim: Production http://127.0.0.1:\(server.productionPort), Sandbox http://127.0.0.1:\(server.sandboxPort)")
        say("appstore-sim: files in \(dir) (set -a; . \(dir)/churnwatch.env)")
        let delivering = deliveryOptions.map { options in
            let delivery = SimDelivery(apps: service.apps, clock: clock, options: options)
            say("appstore-sim: delivering notifications to \(options.production ?? "-") (Sandbox: \(options.sandbox ?? options.production ?? "-"))")
            return Task { await delivery.run() }
        }
        let viewer = CancelPageViewer(service: service)
        let viewing = Task { await viewer.run() }
        if let url = options.retention.url(sandbox: true) {
            say("appstore-sim: cancel page: real-time requests to \(options.retention.productionURL ?? "-") (Sandbox: \(url))")
        }
        say("listening production_port=\(server.productionPort) sandbox_port=\(server.sandboxPort)")
        try await server.waitUntilClosed()
        delivering?.cancel()
        viewing.cancel()
    }
}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a bearer JWT for the API key in --pki-dir (for curl, wrk and scripts).")

    @Option(help: "The simulator's directory (see serve --pki-dir).")
    var pkiDir = "appstore-sim-pki"

    @Option(help: "Bundle id (bid claim); default: APPSTORE_BUNDLE_ID from churnwatch.env, else com.example.churnwatch.")
    var bundleId: String?

    @Option(help: "The app (1, 2, ... as served with serve --apps) whose bundle id goes in bid, from apps.tsv.")
    var app: Int?

    @Option(help: "Lifetime in seconds (Apple accepts at most 3600).")
    var ttl = 3600

    func run() throws {
        let identity = try SimulatorIdentity.loadOrCreate(dir: pkiDir)
        var bid = bundleId
        if bid == nil, let app {
            guard let apps = ClientFiles.apps(dir: pkiDir), app >= 1, app <= apps.count else {
                throw ValidationError("--app \(app): \(pkiDir)/apps.tsv does not list that app (start serve --apps first)")
            }
            bid = apps[app - 1].bundleId
        }
        if bid == nil, let env = try? String(contentsOfFile: pkiDir + "/churnwatch.env", encoding: .utf8) {
            bid = env.split(separator: "\n").first { $0.hasPrefix("APPSTORE_BUNDLE_ID=") }.map { String($0.dropFirst(19)) }
        }
        let now = Int64(Date().timeIntervalSince1970)
        print(try APITokenVerifier.makeToken(
            key: identity.apiKey, keyId: identity.keyId, issuerId: identity.issuerId,
            bundleId: bid ?? "com.example.churnwatch", issuedAt: now, expiresAt: now + Int64(ttl)))
    }
}

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure the simulator: Get All Subscription Statuses per second on loopback with cached signatures, and memory.",
        discussion: "Prints key=value lines: sim_subscribers, sim_events, sim_generate_s, sim_warm_req_per_s, sim_status_req_per_s (cached signatures), sim_status_cold_req_per_s (signing after a clock move), sim_rss_mb.")

    @Option(help: "Number of subscriptions.")
    var subscribers = 100_000

    @Option(help: "Seed.")
    var seed: UInt64 = 1

    @Option(help: "Seconds of measured load.")
    var seconds = 5.0

    @Option(help: "Concurrent keep-alive connections.")
    var connections = 64

    @Option(help: "Subscribers cached and requested (default: all, up to --cache-capacity).")
    var workingSet: Int?

    @Option(help: "Probability that a customer with auto-renew off who redeems a save offer (POST /_sim/offers/redeem) is saved: auto-renew back on, renewing from then on.")
    var offerEffect = 0.0

    @Option(help: "Subscribers whose signed status is cached.")
    var cacheCapacity = 120_000

    @Option(help: "Server event loop threads (default: one per core).")
    var threads: Int?

    @Option(help: "Load generator threads.")
    var clientThreads = 1

    func run() async throws {
        let t0 = Date()
        let config = PopulationConfig(subscribers: subscribers, seed: seed, start: PopulationConfig.defaultStart)
        let pop = Population(config: config)
        let generate = Date().timeIntervalSince(t0)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("appstore-sim-bench-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let identity = try SimulatorIdentity.loadOrCreate(dir: dir)
        var options = SimulatorOptions()
        options.cacheCapacity = cacheCapacity
        guard (0...1).contains(offerEffect) else { throw ValidationError("--offer-effect wants a probability from 0 to 1") }
        options.offerEffect = offerEffect
        let service = SimulatorService(population: pop, identity: identity, clock: SimClock(start: config.start), options: options)
        let server = try await SimulatorServer.start(
            service: service, port: 0, sandboxPort: 0, threads: threads ?? ProcessInfo.processInfo.activeProcessorCount)
        let now = Int64(Date().timeIntervalSince1970)
        let token = try APITokenVerifier.makeToken(
            key: identity.apiKey, keyId: identity.keyId, issuerId: identity.issuerId, bundleId: config.bundleId,
            issuedAt: now, expiresAt: now + 3600)
        let ws = min(workingSet ?? subscribers, cacheCapacity, subscribers)
        let paths = (0..<subscribers).filter { !pop.isSandbox($0) }.prefix(ws).map {
            "/inApps/v1/subscriptions/\(pop.originalTransactionId($0))"
        }
        let warm = try await LoadGenerator.once(
            port: server.productionPort, paths: paths, token: token, connections: connections, threads: clientThreads)
        let load = try await LoadGenerator.timed(
            port: server.productionPort, paths: paths, token: token, connections: connections, seconds: seconds,
            threads: clientThreads)
        let rss = Bench.rssMegabytes()
        // After a clock move every subscriber's status is signed anew: the cold rate.
        service.clock.advance(by: SimTime.day)
        let cold = try await LoadGenerator.once(
            port: server.productionPort, paths: Array(paths.prefix(20_000)), token: token, connections: connections,
            threads: clientThreads)
        try await server.shutdown()
        print("sim_subscribers=\(subscribers)")
        print("sim_events=\(pop.eventCount)")
        print("sim_generate_s=\(String(format: "%.2f", generate))")
        print("sim_working_set=\(paths.count)")
        print("sim_warm_req_per_s=\(Int(warm.perSecond))")
        print("sim_status_req_per_s=\(Int(load.perSecond))")
        print("sim_status_cold_req_per_s=\(Int(cold.perSecond))")
        print("sim_status_errors=\(load.errors + warm.errors + cold.errors)")
        print("sim_rss_mb=\(rss)")
    }

    /// Resident set size of this process (VmRSS), in MB.
    static func rssMegabytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return -1 }
        let kb = Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        return kb < 0 ? -1 : kb / 1024
    }
}

/// Writes a line to standard output unbuffered (scripts wait for the "listening" line).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
