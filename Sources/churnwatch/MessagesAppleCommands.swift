import AppStoreModels
import AppStoreServerAPI
import ArgumentParser
import Foundation

struct MessageUpload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload", abstract: "Upload a message to Apple (checked against Apple's limits first); Apple reviews it (list shows its state).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Option(name: .customLong("message"), help: "The message's identifier: a UUID of your choice.") var message: String
    @Option(name: .customLong("header"), help: "The header (at most 66 characters).") var header: String
    @Option(name: .customLong("body"), help: "The body (at most 144 characters).") var body: String
    @Option(name: .customLong("image"), help: "An uploaded image's identifier, shown with the message.") var image: String?
    @Option(name: .customLong("alt-text"), help: "The image's alternative text (at most 150 characters).") var altText: String?
    @Option(name: .customLong("header-position"), help: "ABOVE_BODY or ABOVE_IMAGE (which needs --image).") var headerPosition: String?
    @Option(name: .customLong("bullet"), help: ArgumentHelp("A bullet point: TEXT|IMAGE_UUID|ALT_TEXT (repeat, at most 5).", valueName: "bullet"))
    var bullets: [String] = []

    func request() throws -> (String, UploadMessageRequestBody) {
        typealias L = RetentionMessageLimits
        let id = try MessagesApple.identifier(message, "--message")
        var body = UploadMessageRequestBody(header: try MessagesApple.within(header, L.header, "--header"),
                                            body: try MessagesApple.within(self.body, L.body, "--body"))
        switch (image, altText) {
        case (nil, nil): break
        case (let i?, let a?): body.image = .init(imageIdentifier: try MessagesApple.identifier(i, "--image"), altText: try MessagesApple.within(a, L.altText, "--alt-text"))
        default: throw CLIError.configuration("--image and --alt-text go together")
        }
        if let p = headerPosition {
            guard ["ABOVE_BODY", "ABOVE_IMAGE"].contains(p) else { throw CLIError.configuration("--header-position \(p.prefix(40)) is not ABOVE_BODY or ABOVE_IMAGE") }
            if p == "ABOVE_IMAGE", body.image == nil { throw CLIError.configuration("--header-position ABOVE_IMAGE needs --image") }
            body.headerPosition = p
        }
        guard bullets.count <= L.bulletPoints else { throw CLIError.configuration("\(bullets.count) bullet points: Apple takes at most \(L.bulletPoints)") }
        body.bulletPoints = try bullets.isEmpty ? nil : bullets.map { b in
            let parts = b.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3 else { throw CLIError.configuration("--bullet \"\(b.prefix(60))\" is not TEXT|IMAGE_UUID|ALT_TEXT") }
            return .init(text: try MessagesApple.within(parts[0], L.bulletPointText, "a bullet's text"),
                         imageIdentifier: try MessagesApple.identifier(parts[1], "a bullet's image"),
                         altText: try MessagesApple.within(parts[2], L.altText, "a bullet's alt text"))
        }
        return (id, body)
    }

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let (id, body) = try request()
            let (client, _) = try await MessagesApple.open(global, app, apple)
            _ = try MessagesApple.value(await client.uploadMessage(id, body), "uploading message \(id)")
            print("message uploaded: \(id) (Apple reviews it: churnwatch messages list)")
        }
    }
}

struct ImageUpload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "upload-image", abstract: "Upload a PNG image to Apple (checked to be a PNG first).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Option(name: .customLong("image"), help: "The image's identifier: a UUID of your choice.") var image: String
    @Option(name: .customLong("file"), help: "The PNG file.") var file: String

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let id = try MessagesApple.identifier(image, "--image")
            let data: Data
            do { data = try Data(contentsOf: URL(fileURLWithPath: file)) } catch {
                throw CLIError.configuration("--file \(file): cannot be read (\(error.localizedDescription))")
            }
            if let problem = MessagesApple.pngProblem(data) { throw CLIError.configuration("--file \(file) \(problem)") }
            let (client, _) = try await MessagesApple.open(global, app, apple)
            _ = try MessagesApple.value(await client.uploadImage(id, png: data), "uploading image \(id)")
            print("image uploaded: \(id) (Apple reviews it: churnwatch messages list)")
        }
    }
}

struct MessageList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The app's messages and images at Apple, with their review state (JSON lines).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let (client, _) = try await MessagesApple.open(global, app, apple)
            for (id, state) in try await MessagesApple.messageStates(client).sorted(by: { $0.key < $1.key }) {
                print(try JSONOutput.line(["kind": "message", "identifier": id, "state": state]))
            }
            let images = try MessagesApple.value(await client.imageList(), "reading the image list")
            for item in images.imageIdentifiers ?? [] {
                print(try JSONOutput.line(["kind": "image", "identifier": item.imageIdentifier ?? "", "state": item.imageState ?? "?"]))
            }
        }
    }
}

struct MessageDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a message or an image at Apple.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Option(name: .customLong("message"), help: "The message to delete.") var message: String?
    @Option(name: .customLong("image"), help: "The image to delete.") var image: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            guard (message == nil) != (image == nil) else { throw CLIError.configuration("give --message or --image (one)") }
            let (client, store) = try await MessagesApple.open(global, app, apple)
            if let message {
                let id = try MessagesApple.identifier(message, "--message")
                let (rules, defaults) = try await store.retentionRules()
                let users = rules.filter { $0.messageId == id }.map(\.name) + (defaults.contains { $0.messageId == id } ? ["a default"] : [])
                guard users.isEmpty else {
                    throw CLIError.configuration("message \(id) is shown by \(users.joined(separator: ", ")): change or remove those first")
                }
                _ = try MessagesApple.value(await client.deleteMessage(id), "deleting message \(id)")
                print("message deleted: \(id)")
            } else if let image {
                let id = try MessagesApple.identifier(image, "--image")
                _ = try MessagesApple.value(await client.deleteImage(id), "deleting image \(id)")
                print("image deleted: \(id)")
            }
        }
    }
}
