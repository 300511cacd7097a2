import Foundation

/// An import file parsed before anything is written: its good records in a private temporary
/// file, its rejections counted. The store then copies the records inside its transaction
/// without parsing anything (a retried transaction reads them again), and memory stays bounded
/// whatever the file's size. The records are kept as length-prefixed fields, in file order.
public final class ImportSpool: Sendable {
    /// Good records read.
    public let read: Int
    /// Lines rejected (all counted), and the first 1,000 of them in file order.
    public let rejectedCount: Int
    public let rejections: [ImportRejection]
    private let url: URL

    /// Parses `parser`'s file into a spool in `directory` (the system's temporary directory by default).
    /// - Throws: `ImportFileError` when the file has no usable header or cannot be read, or the spool cannot be written.
    public init(_ parser: SubscriptionImportParser, directory: URL = FileManager.default.temporaryDirectory) throws {
        let url = directory.appendingPathComponent("churnwatch-import-\(UUID().uuidString).spool")
        guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]),
              let handle = try? FileHandle(forWritingTo: url) else {
            throw ImportFileError("cannot write a temporary file in \(directory.path): check its space and permissions")
        }
        var buffer: [UInt8] = [], read = 0, rejectedCount = 0, rejections: [ImportRejection] = []
        do {
            defer { try? handle.close() }
            try parser.parse(accept: { record in
                read += 1
                Self.append(record, to: &buffer)
                if buffer.count >= 1 << 20 { try Self.flush(&buffer, handle) }
            }, reject: { rejection in
                rejectedCount += 1
                if rejections.count < 1000 { rejections.append(rejection) }
            })
            try Self.flush(&buffer, handle)
        } catch {
            try? FileManager.default.removeItem(at: url)
            throw error
        }
        (self.url, self.read, self.rejectedCount, self.rejections) = (url, read, rejectedCount, rejections)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// Every good record, in file order.
    public func forEach(_ body: (ImportRecord) throws -> Void) throws {
        guard let handle = try? FileHandle(forReadingFrom: url) else { throw ImportFileError("the import's temporary file \(url.path) is gone") }
        defer { try? handle.close() }
        var fields = SpoolFields(handle)
        while let line = try fields.int() {
            guard let otid = try fields.text(), let environment = try fields.text() else { throw Self.damaged }
            let token = try fields.text().flatMap(UUID.init(uuidString:))
            try body(ImportRecord(line: line, originalTransactionId: otid, appAccountToken: token, customerRef: try fields.text(),
                                  environment: environment, receiptData: try fields.text()))
        }
    }

    static let damaged = ImportFileError("the import's temporary file is damaged: import again")

    private static func append(_ r: ImportRecord, to out: inout [UInt8]) {
        withUnsafeBytes(of: Int64(r.line).littleEndian) { out.append(contentsOf: $0) }
        for text in [r.originalTransactionId, r.environment, r.appAccountToken?.uuidString, r.customerRef, r.receiptData] {
            guard let text else {
                withUnsafeBytes(of: UInt32.max.littleEndian) { out.append(contentsOf: $0) }
                continue
            }
            let bytes = Array(text.utf8)
            withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: bytes)
        }
    }

    private static func flush(_ buffer: inout [UInt8], _ handle: FileHandle) throws {
        guard !buffer.isEmpty else { return }
        do {
            try handle.write(contentsOf: buffer)
        } catch {
            throw ImportFileError("cannot write the import's temporary file: \(error.localizedDescription); check the disk")
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Reads a spool's fields back in chunks.
private struct SpoolFields {
    let handle: FileHandle
    var buffer: [UInt8] = []
    var at = 0

    init(_ handle: FileHandle) { self.handle = handle }

    /// The next `n` bytes; nil at the end of the file (before any byte of them).
    mutating func bytes(_ n: Int) throws -> ArraySlice<UInt8>? {
        while buffer.count - at < n {
            let more = try handle.read(upToCount: max(1 << 20, n)) ?? Data()
            if more.isEmpty {
                if buffer.count == at { return nil }
                throw ImportSpool.damaged
            }
            buffer.removeFirst(at)
            at = 0
            buffer.append(contentsOf: more)
        }
        defer { at += n }
        return buffer[at..<(at + n)]
    }

    mutating func int() throws -> Int? {
        guard let b = try bytes(8) else { return nil }
        return Int(Int64(littleEndian: b.withUnsafeBytes { $0.loadUnaligned(as: Int64.self) }))
    }

    mutating func text() throws -> String? {
        guard let b = try bytes(4) else { throw ImportSpool.damaged }
        let n = UInt32(littleEndian: b.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
        guard n != UInt32.max else { return nil }
        guard let text = try bytes(Int(n)) else { throw ImportSpool.damaged }
        return String(decoding: text, as: UTF8.self)
    }
}
