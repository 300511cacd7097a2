import ChurnStore
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
        ("x,not-a-uuid,,Production", "app_account_token is not a UUID"),
        (",,,Production", "original_transaction_id is empty"),
        ("2000000126,,,Moon", "environment must be Production or Sandbox"),
        ("2000000127,,", "3 fields, the header has 4"),
        ("20000 00128,,,Production", "is not an App Store transaction id"),
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
