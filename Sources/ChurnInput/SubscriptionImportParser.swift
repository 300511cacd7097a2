import AppStoreModels
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
    static let columns = ["original_transaction_id", "app_account_token", "customer_ref", "environment", "receipt_data"]
    static let requiredColumns = ["original_transaction_id"]

    let source: ImportSource
    /// The longest line (CSV: record) read; a longer one is rejected with its line number
    /// without being held in memory. 1 MiB holds any legacy receipt.
    public let maxLineBytes: Int
    public static let defaultMaxLineBytes = 1 << 20
    /// The environment of records whose `environment` is empty or missing: the app's configured
    /// one (`APPSTORE_ENVIRONMENT`), `Production` or `Sandbox`.
    public let defaultEnvironment: String

    public init(data: Data, defaultEnvironment: String = "Production", maxLineBytes: Int = defaultMaxLineBytes) throws {
        self.init(source: .data(data), defaultEnvironment: defaultEnvironment, maxLineBytes: maxLineBytes)
    }

    /// Reads the file in chunks when parsing, never whole.
    /// - Throws: `ImportFileError` when it is missing, a directory or unreadable.
    public init(contentsOf url: URL, defaultEnvironment: String = "Production", maxLineBytes: Int = defaultMaxLineBytes) throws {
        let handle = try ImportByteReader.open(url)
        try? handle.close()
        self.init(source: .file(url), defaultEnvironment: defaultEnvironment, maxLineBytes: maxLineBytes)
    }

    private init(source: ImportSource, defaultEnvironment: String, maxLineBytes: Int) {
        self.source = source
        self.maxLineBytes = max(1, maxLineBytes)
        self.defaultEnvironment = (AppStoreEnvironment(registered: defaultEnvironment) ?? .production).rawValue
    }

    /// Calls `accept` for every good record and `reject` for every bad line, in file order.
    /// - Throws: `ImportFileError` when the file has no usable header or cannot be read.
    public func parse(accept: (ImportRecord) throws -> Void, reject: (ImportRejection) throws -> Void) throws {
        var bytes = try ImportByteReader(source)
        if try bytes.peekFirstSignificantByte() == UInt8(ascii: "{") {
            try parseJSONLines(LineReader(bytes, maxLineBytes: maxLineBytes), accept: accept, reject: reject)
        } else {
            try parseCSV(CSVReader(bytes, maxRecordBytes: maxLineBytes), accept: accept, reject: reject)
        }
    }

    // MARK: CSV

    private func parseCSV(_ reader: CSVReader, accept: (ImportRecord) throws -> Void, reject: (ImportRejection) throws -> Void) throws {
        var reader = reader
        guard let (_, headerRecord) = try reader.next() else { throw ImportFileError("the file is empty") }
        guard case .fields(let header) = headerRecord else {
            throw ImportFileError("line 1 is not a header naming \(Self.columns.joined(separator: ","))")
        }
        let names = header.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        var index: [String: Int] = [:]
        for (i, name) in names.enumerated() {
            let clean = i == 0 ? name.replacingOccurrences(of: "\u{FEFF}", with: "") : name
            guard Self.columns.contains(clean) else {
                throw ImportFileError("unknown column \(ImportText.quoted(clean)) in the header: expected \(Self.columns.joined(separator: ","))")
            }
            index[clean] = i
        }
        for required in Self.requiredColumns where index[required] == nil {
            throw ImportFileError("the header has no \(required) column: expected \(Self.columns.joined(separator: ","))")
        }
        while let (line, record) = try reader.next() {
            guard case .fields(let fields) = record else {
                if case .rejected(let reason) = record { try reject(ImportRejection(line: line, reason: reason)) }
                continue
            }
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

        /// What the decoder let through that cannot be stored or used: a NUL character
        /// (`\u0000`; PostgreSQL's text cannot hold one), or an id written as a JSON number
        /// that is not a plain integer (`2.01012e5`: no id Apple can answer).
        func problem(in bytes: [UInt8]) -> String? {
            let strings: [(String, String?)] = [
                ("original_transaction_id", original_transaction_id?.value), ("app_account_token", app_account_token),
                ("customer_ref", customer_ref?.value), ("environment", environment), ("receipt_data", receipt_data),
            ]
            for (key, value) in strings where value?.unicodeScalars.contains("\u{0}") == true {
                return "\(key) holds a NUL character"
            }
            if original_transaction_id?.isNumber == true, !Self.plainIntegerToken(after: "\"original_transaction_id\"", in: bytes) {
                return "original_transaction_id is a JSON number that is not a plain integer: write ids as strings of digits"
            }
            return nil
        }

        /// True when the value after `key` in the raw line is written with digits only.
        static func plainIntegerToken(after key: String, in bytes: [UInt8]) -> Bool {
            let k = Array(key.utf8)
            guard bytes.count > k.count, let start = (0...(bytes.count - k.count)).first(where: { bytes[$0..<$0 + k.count].elementsEqual(k) })
            else { return false }
            var i = start + k.count
            while i < bytes.count, [0x20, 0x09, 0x0D, UInt8(ascii: ":")].contains(bytes[i]) { i += 1 }
            let token = bytes[i...].prefix { ![0x20, 0x09, 0x0D, UInt8(ascii: ","), UInt8(ascii: "}")].contains($0) }
            return !token.isEmpty && token.allSatisfy { (0x30...0x39).contains($0) }
        }
    }

    /// Accepts a JSON string or number (ids are sometimes written as numbers).
    private struct FlexibleString: Decodable {
        var value: String
        var isNumber = false
        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let s = try? c.decode(String.self) { value = s; return }
            if let i = try? c.decode(Int64.self) { value = String(i); isNumber = true; return }
            throw DecodingError.typeMismatch(String.self, .init(codingPath: decoder.codingPath, debugDescription: "not a string"))
        }
    }

    private func parseJSONLines(_ reader: LineReader, accept: (ImportRecord) throws -> Void, reject: (ImportRejection) throws -> Void) throws {
        let decoder = JSONDecoder()
        var reader = reader
        while let (lineNumber, line) = try reader.next() {
            guard case .bytes(let slice) = line else {
                try reject(ImportRejection(line: lineNumber, reason: "longer than \(maxLineBytes) bytes"))
                continue
            }
            let bytes = Array(slice)
            if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            if case .failure(let problem) = ImportText.string(bytes, field: "the line") {
                try reject(ImportRejection(line: lineNumber, reason: problem.reason))
                continue
            }
            let object: JSONLine
            do {
                object = try decoder.decode(JSONLine.self, from: Data(bytes))
            } catch {
                try reject(ImportRejection(line: lineNumber, reason: "not a JSON object with the import keys"))
                continue
            }
            if let problem = object.problem(in: bytes) {
                try reject(ImportRejection(line: lineNumber, reason: problem))
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
        // Apple's transaction ids are decimal numbers (up to 20 digits, a UInt64): anything else
        // would be imported and then fail every night.
        guard otid.isEmpty || ((1...20).contains(otid.utf8.count) && otid.utf8.allSatisfy({ (0x30...0x39).contains($0) })) else {
            return .failure(.init(line: line, reason: "original_transaction_id \(ImportText.quoted(otid, limit: 30)) is not an App Store transaction id (1 to 20 decimal digits)"))
        }
        var uuid: UUID?
        if let token {
            guard let u = UUID(uuidString: token) else {
                return .failure(.init(line: line, reason: "app_account_token is not a UUID"))
            }
            uuid = u
        }
        var env = AppStoreEnvironment.production
        if let environment {
            guard let registered = AppStoreEnvironment(registered: environment) else {
                return .failure(.init(line: line, reason: "environment must be Production or Sandbox"))
            }
            env = registered
        }
        if let receipt, receipt.utf8.contains(where: { !(Self.base64Bytes.contains($0)) }) {
            return .failure(.init(line: line, reason: "receipt_data is not base64"))
        }
        if let customerRef, customerRef.count > 512 {
            return .failure(.init(line: line, reason: "customer_ref is longer than 512 characters"))
        }
        return .success(ImportRecord(line: line, originalTransactionId: otid, appAccountToken: uuid,
                                     customerRef: customerRef, environment: env.rawValue, receiptData: receipt))
    }

    static let base64Bytes: Set<UInt8> = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\r\n".utf8)
}

/// The import file as a whole is unusable (one line, exit code for bad input).
public struct ImportFileError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
