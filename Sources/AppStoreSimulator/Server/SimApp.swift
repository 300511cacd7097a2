import NIOCore
import Synchronization

/// One app the simulator serves (the JWT's `bid`): its population and what Apple keeps per app,
/// the signed-status cache, the notification history, the payload faults, the counters of
/// `/_sim/stats`, and its endpoints (`+Endpoints`, `+Notifications`, `+Consumption`, `+Messaging`, `+Control`).
/// The API key, the signing chain, the clock and the options are the simulator's, shared by every
/// app. ``SimulatorService`` authenticates, limits and hands each request to its app.
public final class SimApp: Sendable {
    public let population: Population
    public let identity: SimulatorIdentity
    public let clock: SimClock
    public let options: SimulatorOptions
    let header: ByteBuffer
    let rogueHeader: ByteBuffer
    /// Per subscriber: 0 no fault, else index + 1 into ``SimulatorOptions/faultKinds``.
    private let faultIndex: [UInt8]
    let stats = Mutex(SimStats())
    let cache: SignedCache
    let notificationIndexBox = Mutex<NotificationIndex?>(nil)
    /// Delivers this app's notifications to its URL, when the simulator does (`--notification-url`).
    let delivery = Mutex<SimDelivery?>(nil)
    /// The Retention Messaging API's configuration (images, messages, defaults, URLs, tests).
    let messaging: SimMessaging
    /// Decides the simulated customers' cancel-page views, when the simulator does.
    let viewer = Mutex<CancelPageViewer?>(nil)

    public var bundleId: String { population.config.bundleId }

    init(population: Population, identity: SimulatorIdentity, clock: SimClock, options: SimulatorOptions) {
        self.population = population
        self.identity = identity
        self.clock = clock
        self.options = options
        header = ByteBuffer(string: identity.chain.encodedHeader + ".")
        rogueHeader = ByteBuffer(string: identity.rogueChain.encodedHeader + ".")
        let kinds = options.faultKinds
        faultIndex = (0..<population.count).map { i in
            guard options.faultRate > 0, !kinds.isEmpty else { return 0 }
            var r = SimRandom(population.config.seed, UInt64(i), 99)
            guard r.chance(options.faultRate) else { return 0 }
            return UInt8(Int(r.next() % UInt64(kinds.count)) + 1)
        }
        cache = SignedCache(capacity: options.cacheCapacity)
        messaging = SimMessaging(options: options.retention)
    }

    /// The payload fault subscription `i` is served with, if any.
    public func fault(_ i: Int) -> PayloadFault? {
        let f = faultIndex[i]
        return f == 0 ? nil : options.faultKinds[Int(f) - 1]
    }
}
