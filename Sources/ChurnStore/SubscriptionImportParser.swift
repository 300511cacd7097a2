import Foundation

/// One subscription to register, as `churnwatch import` reads it.
public struct ImportRecord: Sendable, Equatable {
    public var line: Int
    public var originalTransactionId: String
    public var appAccountToken: UUID?
    public var customerRef: String?
    /// `Production` or `Sandbox`.
    public var environment: String
    /// Base64 receipt for the legacy verifyReceipt path.
    public var receiptData: String?

    public init(line: Int, originalTransactionId: String, appAccountToken: UUID?, customerRef: String?, environment: String, receiptData: String?) {
        self.line = line
        self.originalTransactionId = originalTransactionId
        self.appAccountToken = appAccountToken
        self.customerRef = customerRef
        self.environment = environment
        self.receiptData = receiptData
    }
}

/// A line that could not be imported, and why.
public struct ImportRejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var reason: String
    public var description: String { "line \(line): \(reason)" }
}

/// Reads `churnwatch import` files: CSV with a header naming
/// `original_transaction_id,app_account_token,customer_ref,environment[,receipt_data]` (any
/// order, RFC 4180 quoting), or JSON lines with the same keys. Bad lines are rejected with their
/// line number and reason; the rest are read.
public struct SubscriptionImportParser: Sendable {
    public enum Format: String, Sendable { case csv, jsonLines = "jsonl" }

    static let columns = ["original_transaction_id", "app_account_token", "customer_ref", "environment", "receipt_data"]
    static let requiredColumns = ["original_transaction_id"]

    let data: Data
    public let format: Format
    /// The environment of records whose `environment` is empty or missing: the app's configured
    /// one (`APPSTORE_ENVIRONMENT`), `Production` or `Sandbox`.
    public let defaultEnvironment: String

    /// - Throws: `ImportFileError` when the file has no usable header or is not text.
    public init(data: Data, defaultEnvironment: String = "Production") throws {
        self.data = data
        self.defaultEnvironment = defaultEnvironment.lowercased() == "sandbox" ? "Sandbox" : "Production"
        let firstByte = data.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 && $0 != 0xEF && $0 != 0xBB && $0 != 0xBF }
        format = firstByte == UInt8(ascii: "{") ? .jsonLines : .csv
    }

    public init(contentsOf url: URL, defaultEnvironment: String = "Production") throws {
        let data: Data
        do {
            data = try Data(contentsOf: url, options: .alwaysMapped)
        } catch {
            throw ImportFileError("cannot read \(url.path): \((error as NSError).localizedDescription)")
        }
        try self.init(data: data, defaultEnvironment: defaultEnvironment)
    }

    /// Calls `accept` for every good record and `reject` for every bad line, in file order.
    public func parse(accept: (ImportRecord) throws -> Void, reject: (ImportRejection) throws -> Void) throws {
        switch format {
        case .csv: try parseCSV(accept: accept, reject: reject)
        case .jsonLines: try parseJSONLines(accept: accept, reject: reject)
        }
    }

    // MARK: CSV

    private func parseCSV(accept: (ImportRecord) throws -> Void, reject: (ImportRejection) throws -> Void) throws {
        var reader = CSVReader(data: data)
        guard let (_, header) = try reader.next() else { throw ImportFileError("the file is empty") }
        let names = header.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        var index: [String: Int] = [:]
        for (i, name) in names.enumerated() {
            let clean = i == 0 ? name.replacingOccurrences(of: "\u{FEFF}", with: "") : name
            guard Self.columns.contains(clean) else {
                throw ImportFileError("unknown column \"\(clean)\" in the header: expected \(Self.columns.joined(separator: ","))")
            }
            index[clean] = i
        }
        for required in Self.requiredColumns where index[required] == nil {
            throw ImportFileError("the header has no \(required) column: expected \(Self.columns.joined(separator: ","))")
        }
        while let (line, fields) = try reader.next() {
            if fields.count == 1 && fields[0].isEmpty { continue }
            guard fields.count == names.count else {
                try reject(ImportRejection(line: line, reason: "\(fields.count) fields, the header has \(names.count)"))
                continue
            }
            func field(_ name: String) -> String? {
                guard let i = index[name] else { return nil }
                let v = fields[i].trimmingCharacters(in: .whitespaces)
                return v.isEmpty ? nil : v
            }
            switch Self.validate(line: line, otid: field("original_transaction_id"), token: field("app_account_token"),
                                 customerRef: field("customer_ref"), environment: field("environment") ?? defaultEnvironment,
                                 receipt: field("receipt_data")) {
            case .success(let record): try accept(record)
            case .failure(let rejection): try reject(rejection)
            }
        }
    }

    // MARK: JSON lines

    private struct JSONLine: Decodable {
        var original_transaction_id: FlexibleString?
        var app_account_token: String?
        var customer_ref: FlexibleString?
        var environment: String?
        var receipt_data: String?
    }

    /// Accepts a JSON string or number (ids are sometimes written as numbers).
    private struct FlexibleString: Decodable {
        var value: String
        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let s = try? c.decode(String.self) { value = s; return }
            if let i = try? c.decode(Int64.self) { value = String(i); return }
            throw DecodingError.typeMismatch(String.self, .init(codingPath: decoder.codingPath, debugDescription: "not a string"))
        }
    }

    private func parseJSONLines(accept: (ImportRecord) throws -> Void, reject: (ImportRejection) throws -> Void) throws {
        let decoder = JSONDecoder()
        var lineNumber = 0
        var start = data.startIndex
        while start < data.endIndex {
            let end = data[start...].firstIndex(of: 0x0A) ?? data.endIndex
            lineNumber += 1
            let slice = data[start..<end]
            start = end < data.endIndex ? data.index(after: end) : end
            let trimmed = slice.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
            if trimmed.isEmpty || trimmed.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            let object: JSONLine
            do {
                object = try decoder.decode(JSONLine.self, from: Data(slice))
            } catch {
                try reject(ImportRejection(line: lineNumber, reason: "not a JSON object with the import keys"))
                continue
            }
            func clean(_ s: String?) -> String? {
                guard let v = s?.trimmingCharacters(in: .whitespaces), !v.isEmpty else { return nil }
                return v
            }
            switch Self.validate(line: lineNumber, otid: clean(object.original_transaction_id?.value), token: clean(object.app_account_token),
                                 customerRef: clean(object.customer_ref?.value), environment: clean(object.environment) ?? defaultEnvironment,
                                 receipt: clean(object.receipt_data)) {
            case .success(let record): try accept(record)
            case .failure(let rejection): try reject(rejection)
            }
        }
    }

    // MARK: Validation

    static func validate(line: Int, otid: String?, token: String?, customerRef: String?, environment: String?, receipt: String?)
        -> Result<ImportRecord, ImportRejection>
    {
        // A receipt alone: "" here; the row gets a placeholder key and its first poll learns the
        // id from the receipt (ReceiptRegistration).
        guard let otid = otid ?? receipt.map({ _ in "" }) else {
            return .failure(.init(line: line, reason: "original_transaction_id is empty (give it, or receipt_data to learn it from)"))
        }
        guard otid.isEmpty || otid.count <= 64, otid.unicodeScalars.allSatisfy({ $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" || $0 == "." }) else {
            return .failure(.init(line: line, reason: "original_transaction_id \"\(otid.prefix(70))\" is not an App Store transaction id"))
        }
        var uuid: UUID?
        if let token {
            guard let u = UUID(uuidString: token) else {
                return .failure(.init(line: line, reason: "app_account_token is not a UUID"))
            }
            uuid = u
        }
        let env: String
        switch environment?.lowercased() {
        case nil, "production": env = "Production"
        case "sandbox": env = "Sandbox"
        default: return .failure(.init(line: line, reason: "environment must be Production or Sandbox"))
        }
        if let receipt, receipt.utf8.contains(where: { !(Self.base64Bytes.contains($0)) }) {
            return .failure(.init(line: line, reason: "receipt_data is not base64"))
        }
        if let customerRef, customerRef.count > 512 {
            return .failure(.init(line: line, reason: "customer_ref is longer than 512 characters"))
        }
        return .success(ImportRecord(line: line, originalTransactionId: otid, appAccountToken: uuid,
                                     customerRef: customerRef, environment: env, receiptData: receipt))
    }

    static let base64Bytes: Set<UInt8> = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\r\n".utf8)
}

/// The import file as a whole is unusable (one line, exit code for bad input).
public struct ImportFileError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// RFC 4180 records from bytes: quoted fields may hold commas, quotes ("") and newlines.
struct CSVReader {
    let data: Data
    var position: Data.Index
    var line = 0

    init(data: Data) {
        self.data = data
        position = data.startIndex
    }

    /// The next record and the line it starts on, or nil at the end.
    mutating func next() throws -> (Int, [String])? {
        guard position < data.endIndex else { return nil }
        line += 1
        let startLine = line
        var fields: [String] = []
        var field: [UInt8] = []
        var inQuotes = false
        var i = position
        while i < data.endIndex {
            let c = data[i]
            if inQuotes {
                if c == 0x22 {
                    let next = data.index(after: i)
                    if next < data.endIndex && data[next] == 0x22 {
                        field.append(0x22)
                        i = data.index(after: next)
                        continue
                    }
                    inQuotes = false
                } else {
                    if c == 0x0A { line += 1 }
                    field.append(c)
                }
            } else if c == 0x22 && field.isEmpty {
                inQuotes = true
            } else if c == 0x2C {
                fields.append(String(decoding: field, as: UTF8.self))
                field.removeAll(keepingCapacity: true)
            } else if c == 0x0A {
                position = data.index(after: i)
                if field.last == 0x0D { field.removeLast() }
                fields.append(String(decoding: field, as: UTF8.self))
                return (startLine, fields)
            } else {
                field.append(c)
            }
            i = data.index(after: i)
        }
        position = data.endIndex
        if inQuotes { throw ImportFileError("line \(startLine): a quoted field is never closed") }
        if field.last == 0x0D { field.removeLast() }
        fields.append(String(decoding: field, as: UTF8.self))
        return (startLine, fields)
    }
}
