@testable import AppStoreServerAPI
import AppStoreModels
@testable import ChurnServe
import Foundation
import Testing

/// serve's parts that need no server: the applier's pace beside a busy door, the cache of
/// verified notifications its applier reads instead of the inbox, the body's fast reading.
struct ServeDoorFirstTests {
    @Test("the applier gives way only while the door is busy, and never for more than its least share allows")
    func pace() {
        let pace = ApplierPace(busyAt: 8, leastShare: 0.25)
        // A quiet door: no wait, whatever the batch took.
        #expect(pace.giveWay(inFlight: 7, batch: .milliseconds(100), waited: .zero) == .zero)
        // Busy: at most 3 times the batch (a quarter of its own pace kept), less what was waited.
        #expect(pace.giveWay(inFlight: 8, batch: .milliseconds(100), waited: .zero) == .milliseconds(300))
        #expect(pace.giveWay(inFlight: 64, batch: .milliseconds(100), waited: .milliseconds(250)) == .milliseconds(50))
        #expect(pace.giveWay(inFlight: 64, batch: .milliseconds(100), waited: .milliseconds(300)) == .zero)
        // A share of 1: the applier never waits.
        #expect(ApplierPace(busyAt: 1, leastShare: 1).giveWay(inFlight: 100, batch: .seconds(1), waited: .zero) == .zero)
        // Out-of-range settings are brought into range, not trusted.
        #expect(ApplierPace(busyAt: 0, leastShare: 0).busyAt == 1)
        #expect(ApplierPace(busyAt: 0, leastShare: 0).leastShare == 0.01)
    }

    static func verified(_ uuid: UUID) -> VerifiedNotification {
        let data = NotificationData(bundleId: "com.example.app", signedTransactionInfo: "t.t.t", signedRenewalInfo: "r.r.r")
        let payload = ResponseBodyV2DecodedPayload(notificationType: "DID_RENEW", notificationUUID: uuid.uuidString, data: data,
                                                   signedDate: EpochMilliseconds(rawValue: 1))
        return VerifiedNotification(payload: payload, notificationUUID: uuid.uuidString, signedDate: EpochMilliseconds(rawValue: 1),
                                    environment: .sandbox)
    }

    @Test("the cache of verified notifications: taken once, by the app that verified it; full, it keeps the oldest (the drain applies them first)")
    func cache() {
        let cache = VerifiedCache(capacity: 2)
        let (a, b, c) = (UUID(), UUID(), UUID())
        cache.put(a, bundleId: "Com.Example.App", Self.verified(a))
        cache.put(b, bundleId: "com.example.app", Self.verified(b))
        cache.put(c, bundleId: "com.example.app", Self.verified(c))
        #expect(cache.count == 2)
        #expect(cache.take(c, bundleId: "com.example.app") == nil)
        // Another app's drain does not take it; its own does, once.
        #expect(cache.take(a, bundleId: "com.example.other") == nil)
        let taken = cache.take(a, bundleId: "com.example.APP")
        #expect(taken?.notificationUUID == a.uuidString)
        // The inner JWS stay, for the applier to verify.
        #expect(taken?.payload.data?.signedTransactionInfo == "t.t.t")
        #expect(taken?.payload.data?.signedRenewalInfo == "r.r.r")
        #expect(cache.take(a, bundleId: "com.example.app") == nil)
        cache.remove(b)
        #expect(cache.count == 0)
    }

    @Test("an entry older than its age goes when the cache is full (rows another serve applied are never taken here)")
    func cacheAge() {
        let cache = VerifiedCache(capacity: 1, maxAge: .zero)
        let (a, b) = (UUID(), UUID())
        cache.put(a, bundleId: "com.example.app", Self.verified(a))
        cache.put(b, bundleId: "com.example.app", Self.verified(b))
        #expect(cache.take(a, bundleId: "com.example.app") == nil)
        #expect(cache.take(b, bundleId: "com.example.app")?.notificationUUID == b.uuidString)
    }

    @Test("the body: Apple's exact shape read directly; other spacing, members or escapes read by JSONDecoder; anything else refused")
    func body() {
        func read(_ s: String) -> String? { AppleDoor.signedPayload(Array(s.utf8)) }
        #expect(AppleDoor.plainSignedPayload(Array(#"{"signedPayload":"a.b.c"}"#.utf8)) == "a.b.c")
        #expect(AppleDoor.plainSignedPayload(Array(" {\n \"signedPayload\" : \"a.b.c\" }\n".utf8)) == "a.b.c")
        // Not the plain shape: JSONDecoder reads them, as before.
        #expect(AppleDoor.plainSignedPayload(Array(#"{"signedPayload":"a\/b"}"#.utf8)) == nil)
        #expect(read(#"{"signedPayload":"a\/b"}"#) == "a/b")
        #expect(read(#"{"x":1,"signedPayload":"a.b.c"}"#) == "a.b.c")
        #expect(read(#"{"signedPayload":"a.b.c","x":1}"#) == "a.b.c")
        for bad in [#"{"signedPayload":"a.b.c""#, #"{"signedPayload":"a.b.c"}}"#, #"{"signedPayload":1}"#, #"["a"]"#, "", "{}",
                    #"{"signedPayloadX":"a"}"#] {
            #expect(read(bad) == nil, "\(bad)")
        }
    }
}
