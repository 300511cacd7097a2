import AppStoreModels
import Foundation

extension SimApp {
    // MARK: Retention Messaging API (/inApps/v1/messaging/...)

    /// `/inApps/v1/messaging/{path}`: this app's images, messages, default messages, Get
    /// Retention Message URL (of the environment whose host the request came to) and performance tests.
    func messaging(_ req: SimRequest, path: String, now: Int64) throws(AppleError) -> SimResponse {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map { $0.removingPercentEncoding ?? String($0) }
        switch (req.method, parts.count, parts.first ?? "") {
        case ("GET", 2, "image") where parts[1] == "list": return imageList(now: now)
        case ("PUT", 2, "image"): return try putImage(req, id: parts[1], now: now)
        case ("DELETE", 2, "image"): return try deleteImage(id: parts[1])
        case ("GET", 2, "message") where parts[1] == "list": return messageList(now: now)
        case ("PUT", 2, "message"): return try putMessage(req, id: parts[1], now: now)
        case ("DELETE", 2, "message"): return try deleteMessage(id: parts[1])
        case ("GET", 3, "default"), ("PUT", 3, "default"), ("DELETE", 3, "default"):
            return try defaultMessage(req, productId: parts[1], locale: parts[2], now: now)
        case ("GET", 2, "realtime") where parts[1] == "url", ("PUT", 2, "realtime") where parts[1] == "url",
             ("DELETE", 2, "realtime") where parts[1] == "url":
            return try realtimeURL(req, now: now)
        case ("POST", 1, "performanceTest"): return try startPerformanceTest(req, now: now)
        case ("GET", 3, "performanceTest") where parts[1] == "result": return try performanceTestResult(id: parts[2])
        default: throw AppleError(404, 4_040_000, "Not found.")
        }
    }

    /// A UUID in its lowercase form (identifiers compare that way), or nil.
    static func uuid(_ text: String) -> String? { UUID(uuidString: text)?.uuidString.lowercased() }

    static func ok() -> SimResponse { SimResponse(status: 200) }

    // MARK: Images

    private func putImage(_ req: SimRequest, id text: String, now: Int64) throws(AppleError) -> SimResponse {
        guard let id = Self.uuid(text) else { throw .generalBadRequest }
        let size = req.query.first { $0.0 == "imageSize" }?.1 ?? "FULL_SIZE"
        guard ["FULL_SIZE", "BULLET_POINT"].contains(size) else { throw .badRequestImageSize }
        guard SimMessaging.pngSize(req.body) != nil else { throw .invalidImage }
        let refusal = messaging.state.withLock { s -> AppleError? in
            guard s.images[id] == nil else { return .imageAlreadyExists }
            s.images[id] = SimMessaging.Image(uploadedAt: now, size: size)
            return nil
        }
        if let refusal { throw refusal }
        return Self.ok()
    }

    private func deleteImage(id text: String) throws(AppleError) -> SimResponse {
        guard let id = Self.uuid(text) else { throw .generalBadRequest }
        let refusal = messaging.state.withLock { s -> AppleError? in
            guard s.images[id] != nil else { return .imageNotFound }
            guard !s.messages.values.contains(where: { $0.images.contains(id) }) else { return .imageInUse }
            s.images[id] = nil
            return nil
        }
        if let refusal { throw refusal }
        return Self.ok()
    }

    private func imageList(now: Int64) -> SimResponse {
        let items = messaging.state.withLock { s in
            s.images.sorted { $0.key < $1.key }.map { id, image in
                RetentionWire.ImageItem(
                    imageIdentifier: id, imageState: messaging.review(uploadedAt: image.uploadedAt, rejected: false, at: now).rawValue,
                    imageSize: image.size)
            }
        }
        return .json(200, RetentionWire.ImageList(imageIdentifiers: items))
    }

    // MARK: Messages

    private func putMessage(_ req: SimRequest, id text: String, now: Int64) throws(AppleError) -> SimResponse {
        guard let id = Self.uuid(text),
              let body = try? JSONDecoder().decode(RetentionWire.UploadMessageRequestBody.self, from: Data(req.body))
        else { throw .generalBadRequest }
        let images = try Self.validate(body)
        let rejected = messaging.rejects(body)
        let refusal = messaging.state.withLock { s -> AppleError? in
            guard s.messages[id] == nil else { return .messageAlreadyExists }
            guard images.allSatisfy({ s.images[$0] != nil }) else { return .imageNotFound }
            s.messages[id] = SimMessaging.Message(body: body, uploadedAt: now, rejected: rejected, images: images)
            return nil
        }
        if let refusal { throw refusal }
        return Self.ok()
    }

    /// Apple's limits on an uploaded message (`UploadMessageRequestBody`); the images it names.
    static func validate(_ m: RetentionWire.UploadMessageRequestBody) throws(AppleError) -> [String] {
        func length(_ s: String) -> Int { s.unicodeScalars.count }
        guard length(m.header) <= 66 else { throw .headerTooLong }
        guard length(m.body) <= 144 else { throw .bodyTooLong }
        let bullets = m.bulletPoints ?? []
        guard bullets.count <= 5 else { throw .tooManyBulletPoints }
        guard bullets.allSatisfy({ length($0.text) <= 66 }) else { throw .bulletPointTextTooLong }
        let alts = bullets.map(\.altText) + (m.image.map { [$0.altText] } ?? [])
        guard alts.allSatisfy({ length($0) <= 150 }) else { throw .altTextTooLong }
        switch m.headerPosition {
        case nil, "ABOVE_BODY": break
        case "ABOVE_IMAGE": guard m.image != nil else { throw .aboveImageRequiresAnImage }
        default: throw .generalBadRequest
        }
        var images: [String] = []
        for text in (m.image.map { [$0.imageIdentifier] } ?? []) + bullets.map(\.imageIdentifier) {
            guard let id = uuid(text) else { throw .generalBadRequest }
            images.append(id)
        }
        return images
    }

    /// Deletes a message; default messages that name it are removed with it.
    private func deleteMessage(id text: String) throws(AppleError) -> SimResponse {
        guard let id = Self.uuid(text) else { throw .generalBadRequest }
        let found = messaging.state.withLock { s -> Bool in
            guard s.messages.removeValue(forKey: id) != nil else { return false }
            s.defaults = s.defaults.filter { $0.value != id }
            return true
        }
        guard found else { throw .messageNotFound }
        return Self.ok()
    }

    private func messageList(now: Int64) -> SimResponse {
        let items = messaging.state.withLock { s in
            s.messages.sorted { $0.key < $1.key }.map { id, m in
                RetentionWire.MessageItem(
                    messageIdentifier: id, messageState: messaging.review(uploadedAt: m.uploadedAt, rejected: m.rejected, at: now).rawValue)
            }
        }
        return .json(200, RetentionWire.MessageList(messageIdentifiers: items))
    }

    // MARK: Default messages

    private func defaultMessage(_ req: SimRequest, productId: String, locale: String, now: Int64) throws(AppleError) -> SimResponse {
        guard population.catalog.index(of: productId) != nil else { throw .invalidProductId }
        guard locale.range(of: #"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$"#, options: .regularExpression) != nil else {
            throw .invalidLocale
        }
        let key = SimMessaging.DefaultKey(productId: productId, locale: locale)
        switch req.method {
        case "GET":
            guard let id = messaging.defaultMessage(productId: productId, locale: locale) else { throw .defaultMessageNotFound }
            return .json(200, RetentionWire.DefaultConfiguration(messageIdentifier: id))
        case "DELETE":
            guard messaging.state.withLock({ $0.defaults.removeValue(forKey: key) }) != nil else { throw .defaultMessageNotFound }
            return Self.ok()
        default:
            guard let body = try? JSONDecoder().decode(RetentionWire.DefaultConfiguration.self, from: Data(req.body)),
                  let id = body.messageIdentifier.flatMap(Self.uuid) else { throw .generalBadRequest }
            let refusal = messaging.state.withLock { s -> AppleError? in
                guard let m = s.messages[id] else { return .messageNotFound }
                guard messaging.review(uploadedAt: m.uploadedAt, rejected: m.rejected, at: now) == .approved else { return .messageNotApproved }
                let imagesApproved = m.images.allSatisfy {
                    s.images[$0].map { messaging.review(uploadedAt: $0.uploadedAt, rejected: false, at: now) == .approved } ?? false
                }
                guard imagesApproved else { return .imageNotApproved }
                s.defaults[key] = id
                return nil
            }
            if let refusal { throw refusal }
            return Self.ok()
        }
    }

    // MARK: Get Retention Message URL

    /// The URL of the environment whose host the request came to. Setting the Production URL
    /// needs a passed performance test (or `--retention-url`).
    private func realtimeURL(_ req: SimRequest, now: Int64) throws(AppleError) -> SimResponse {
        let env = req.environment
        switch req.method {
        case "GET":
            guard let u = messaging.url(env) else { throw .realtimeURLNotFound }
            return .json(200, RetentionWire.RealtimeURL(realtimeURL: u.url))
        case "DELETE":
            guard messaging.state.withLock({ $0.urls.removeValue(forKey: env) }) != nil else { throw .realtimeURLNotFound }
        default:
            guard let text = (try? JSONDecoder().decode(RetentionWire.RealtimeURL.self, from: Data(req.body)))?.realtimeURL,
                  text.utf8.count <= 256, let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                  url.host?.isEmpty == false
            else { throw .badRequestRealtimeURL }
            let refusal = messaging.state.withLock { s -> AppleError? in
                guard env == .sandbox || s.passedTest else { return .forbiddenNoPassingTest }
                s.urls[env] = SimMessaging.URLSetting(url: text, since: now)
                return nil
            }
            if let refusal { throw refusal }
        }
        viewer.withLock { $0 }?.refreshBarrier()
        return Self.ok()
    }

    // MARK: Performance test

    private func startPerformanceTest(_ req: SimRequest, now: Int64) throws(AppleError) -> SimResponse {
        guard let id = (try? JSONDecoder().decode(RetentionWire.PerformanceTestRequest.self, from: Data(req.body)))?.originalTransactionId,
              !id.isEmpty, id.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 })
        else { throw .invalidPerformanceTestRequest }
        guard let loc = population.locate(transactionId: id), loc.transaction == 0, population.exists(loc.subscriber, at: now) else {
            throw .originalTransactionIdNotFound
        }
        guard population.isSandbox(loc.subscriber) else { throw .invalidPerformanceTestRequest }
        guard let target = messaging.url(.sandbox)?.url else { throw .realtimeURLNotFound }
        let requestId = UUID().uuidString.lowercased()
        let config = RetentionWire.PerformanceTestConfig(options.retention.performanceTest)
        let refusal = messaging.state.withLock { s -> AppleError? in
            guard s.running == nil else { return .existingPerformanceTestRun }
            s.running = requestId
            s.tests[requestId] = SimMessaging.TestRun(config: config, target: target)
            return nil
        }
        if let refusal { throw refusal }
        let runner = PerformanceTestRunner(app: self, requestId: requestId, subscriber: loc.subscriber, config: config, target: target)
        let task = Task { await runner.run() }
        messaging.state.withLock { s in
            if s.tests[requestId]?.finished == false { s.tests[requestId]?.task = task }
        }
        return .json(200, RetentionWire.PerformanceTestResponse(config: config, requestId: requestId))
    }

    private func performanceTestResult(id text: String) throws(AppleError) -> SimResponse {
        guard let id = Self.uuid(text) else { throw .invalidRequestId }
        guard let run = messaging.state.withLock({ $0.tests[id] }) else { throw .performanceTestRunNotFound }
        return .json(200, SimMessaging.result(run))
    }
}
