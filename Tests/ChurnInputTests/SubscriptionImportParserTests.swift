import ChurnInput
import Foundation
import Testing

@Suite("SubscriptionImportParser")
struct SubscriptionImportParserTests {
    func parse(_ text: String) throws -> ([ImportRecord], [ImportRejection]) {
        let parser = try SubscriptionImportParser(data: Data(text.utf8))
        var records: [ImportRecord] = []
        var rejections: [ImportRejection] = []
        try parser.parse(accept: { records.append($0) }, reject: { rejections.append($0) })
        return (records, rejections)
    }

    @Test("CSV with quoting, CRLF, reordered columns, optional receipt_data")
    func csv() throws {
        let token = "8F4C2D7A-3B1E-4F6A-9C0D-2E5B7A1C3D4F"
        let text = "environment,original_transaction_id,customer_ref,app_account_token\r\n"
            + "Production,2000000123,\"Smith, \"\"J\"\"\",\(token)\r\n"
            + "sandbox,2000000124,\"multi\nline\",\r\n"
            + ",2000000125,,\r\n"
        let (records, rejections) = try parse(text)
        #expect(rejections == [])
        #expect(records.count == 3)
        #expect(records[0] == ImportRecord(line: 2, originalTransactionId: "2000000123", appAccountToken: UUID(uuidString: token),
                                           customerRef: "Smith, \"J\"", environment: "Production", receiptData: nil))
        #expect(records[1].customerRef == "multi\nline")
        #expect(records[1].environment == "Sandbox")
        #expect(records[2].line == 5, "a quoted newline moves later line numbers")
        #expect(records[2].environment == "Production")
    }

    @Test("an empty environment is the app's configured one (APPSTORE_ENVIRONMENT), CSV and JSON lines")
    func defaultEnvironment() throws {
        let csv = "original_transaction_id,app_account_token,customer_ref,environment\n1000,,,\n1001,,,Production\n1002,,,sandbox\n"
        let parser = try SubscriptionImportParser(data: Data(csv.utf8), defaultEnvironment: "Sandbox")
        var records: [ImportRecord] = []
        try parser.parse(accept: { records.append($0) }, reject: { Issue.record("rejected \($0)") })
        #expect(records.map(\.environment) == ["Sandbox", "Production", "Sandbox"])

        let jsonl = "{\"original_transaction_id\": \"2000\"}\n{\"original_transaction_id\": \"2001\", \"environment\": \"Production\"}\n"
        let jsonParser = try SubscriptionImportParser(data: Data(jsonl.utf8), defaultEnvironment: "Sandbox")
        records = []
        try jsonParser.parse(accept: { records.append($0) }, reject: { Issue.record("rejected \($0)") })
        #expect(records.map(\.environment) == ["Sandbox", "Production"])

        let (withoutDefault, _) = try parse("original_transaction_id\n3000\n")
        #expect(withoutDefault.map(\.environment) == ["Production"])
    }

    @Test("bad lines are rejected with line number and reason; good lines still come through", arguments: [
        ("1002,not-a-uuid,,Production", "app_account_token is not a UUID"),
        (",,,Production", "original_transaction_id is empty"),
        ("2000000126,,,Moon", "environment must be Production or Sandbox"),
        ("2000000127,,", "3 fields, the header has 4"),
        ("20000 00128,,,Production", "is not an App Store transaction id"),
        // Issue 18 item 8: ids Apple can never answer.
        ("abc,,,Production", "is not an App Store transaction id"),
        ("-201013,,,Production", "is not an App Store transaction id"),
        ("2.01012e5,,,Production", "is not an App Store transaction id"),
        ("123456789012345678901,,,Production", "is not an App Store transaction id"),
        // Issue 18 item 6: a NUL byte in one field rejects that line only.
        ("2000000129,,a\u{0}b,Production", "field 3 holds a NUL byte"),
    ])
    func rejections(line: String, reason: String) throws {
        let text = "original_transaction_id,app_account_token,customer_ref,environment\n1000,,,Production\n\(line)\n1001,,,Sandbox\n"
        let (records, rejections) = try parse(text)
        #expect(records.map(\.originalTransactionId) == ["1000", "1001"])
        #expect(rejections.count == 1)
        #expect(rejections.first?.line == 3)
        #expect(rejections.first?.reason.contains(reason) == true, "\(rejections)")
    }

    @Test("an unknown column or a missing id column rejects the whole file")
    func badHeader() throws {
        #expect(throws: ImportFileError.self) { try parse("original_transaction_id,email\n1,a@b\n") }
        #expect(throws: ImportFileError.self) { try parse("customer_ref,environment\nx,Production\n") }
        #expect(throws: ImportFileError.self) { try parse("original_transaction_id\n\"unterminated\n") }
    }

    @Test("JSON lines with the same keys; numbers accepted as ids")
    func jsonLines() throws {
        let text = """
            {"original_transaction_id": "3000000001", "customer_ref": "c1", "environment": "Sandbox", "receipt_data": "TUlJ+/w=="}

            {"original_transaction_id": 3000000002, "app_account_token": "not-a-uuid"}
            not json
            {"original_transaction_id": 3000000003}
            """
        let (records, rejections) = try parse(text)
        #expect(records.map(\.originalTransactionId) == ["3000000001", "3000000003"])
        #expect(records[0].receiptData == "TUlJ+/w==")
        #expect(records[0].environment == "Sandbox")
        #expect(rejections.map(\.line) == [3, 4])
    }

    func parseBytes(_ bytes: [UInt8], maxLineBytes: Int = SubscriptionImportParser.defaultMaxLineBytes) throws -> ([ImportRecord], [ImportRejection]) {
        let parser = try SubscriptionImportParser(data: Data(bytes), maxLineBytes: maxLineBytes)
        var records: [ImportRecord] = []
        var rejections: [ImportRejection] = []
        try parser.parse(accept: { records.append($0) }, reject: { rejections.append($0) })
        return (records, rejections)
    }

    @Test("invalid UTF-8 rejects its line instead of being stored as U+FFFD (issue 18 item 8)")
    func invalidUTF8() throws {
        let csv = Array("original_transaction_id,customer_ref\n1000,ok\n1001,caf".utf8) + [0xC3, 0x28] + Array("\n1002,x\n".utf8)
        let (records, rejections) = try parseBytes(csv)
        #expect(records.map(\.originalTransactionId) == ["1000", "1002"])
        #expect(rejections.map(\.line) == [3])
        #expect(rejections.first?.reason.contains("not valid UTF-8") == true)

        let jsonl = Array("{\"original_transaction_id\": \"2000\"}\n{\"original_transaction_id\": \"2001\", \"customer_ref\": \"".utf8)
            + [0xFF] + Array("\"}\n{\"original_transaction_id\": \"2002\"}\n".utf8)
        let (jsonRecords, jsonRejections) = try parseBytes(jsonl)
        #expect(jsonRecords.map(\.originalTransactionId) == ["2000", "2002"])
        #expect(jsonRejections.map(\.line) == [2])
    }

    @Test("JSON lines: a NUL character or an id that is not a plain integer rejects the line (issue 18 items 6, 8)")
    func jsonNulAndNumbers() throws {
        let text = """
            {"original_transaction_id": "3000000001"}
            {"original_transaction_id": "3000000002", "customer_ref": "a\\u0000b"}
            {"original_transaction_id": 2.01012e5}
            {"original_transaction_id": 201012}
            {"original_transaction_id": "abc"}
            {"original_transaction_id": "-201013"}
            """
        let (records, rejections) = try parse(text)
        #expect(records.map(\.originalTransactionId) == ["3000000001", "201012"])
        #expect(rejections.map(\.line) == [2, 3, 5, 6], "\(rejections)")
        #expect(rejections.first?.reason.contains("NUL") == true)
        #expect(rejections.dropFirst().first?.reason.contains("not a plain integer") == true)
    }

    @Test("a line longer than the limit is rejected without being held, and reading goes on (issue 18 item 6)")
    func overLongLines() throws {
        let long = String(repeating: "9", count: 5000)
        let csv = "original_transaction_id,customer_ref\n1000,a\n1001,\"\(long),\(long)\"\n1002,b\n"
        let (records, rejections) = try parseBytes(Array(csv.utf8), maxLineBytes: 1000)
        #expect(records.map(\.originalTransactionId) == ["1000", "1002"])
        #expect(rejections.map(\.line) == [3], "\(rejections)")
        #expect(rejections.first?.reason.contains("longer than 1000 bytes") == true)

        let jsonl = "{\"original_transaction_id\": \"1\"}\n{\"customer_ref\": \"\(long)\"}\n{\"original_transaction_id\": \"2\"}\n"
        let (jsonRecords, jsonRejections) = try parseBytes(Array(jsonl.utf8), maxLineBytes: 1000)
        #expect(jsonRecords.map(\.originalTransactionId) == ["1", "2"])
        #expect(jsonRejections.map(\.line) == [2])
    }

    @Test("an unknown column is echoed bounded and escaped (issue 18 item 11)")
    func unknownColumnEcho() throws {
        let binary = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }.filter { $0 != 0x0A && $0 != 0x2C }
        do {
            _ = try parseBytes(Array("original_transaction_id,".utf8) + binary + [0x0A, 0x31, 0x0A])
            Issue.record("accepted")
        } catch let error as ImportFileError {
            #expect(error.description.utf8.count < 300, "\(error.description.prefix(300))")
            #expect(!error.description.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0xFFFD })
        }
    }

    @Test("a receipt without an id is accepted (the id is learned at its first poll); neither is rejected")
    func receiptAlone() throws {
        let csv = "original_transaction_id,app_account_token,customer_ref,environment,receipt_data\n,,a,,TUlJ+/w==\n,,b,,\n"
        let (records, rejections) = try parse(csv)
        #expect(records.map(\.originalTransactionId) == [""] && records.first?.receiptData == "TUlJ+/w==")
        #expect(rejections.map(\.line) == [3] && rejections.first?.reason.contains("receipt_data") == true)
        let (json, _) = try parse("{\"receipt_data\": \"TUlJ\", \"customer_ref\": \"c\"}\n")
        #expect(json.map(\.originalTransactionId) == [""] && json.first?.customerRef == "c")
    }
}
