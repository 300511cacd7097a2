import ChurnInput
import Foundation
import Testing

/// The import is parsed before the store's transaction (issue 39): the spool gives back exactly
/// what the parser accepted, in order, as often as it is read, and counts what it rejected.
@Suite("ImportSpool")
struct ImportSpoolTests {
    @Test("what the parser accepted, in file order, read twice alike; rejections counted; the file removed with the spool")
    func roundTrip() throws {
        let receipt = String(repeating: "QUJD", count: 200_000)
        var csv = "original_transaction_id,app_account_token,customer_ref,environment,receipt_data\n"
        csv += "1000000001,\(UUID()),\"née, \"\"quoted\"\"\",Sandbox,\n"
        csv += "1000000002,,,,\(receipt)\n"
        csv += "not an id,,x,Production,\n"
        for i in 0..<3000 { csv += "\(2_000_000_000 + i),,c\(i),Production,\n" }
        let parser = try SubscriptionImportParser(data: Data(csv.utf8))
        var parsed: [ImportRecord] = []
        try parser.parse(accept: { parsed.append($0) }, reject: { _ in })
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var spool: ImportSpool? = try ImportSpool(parser, directory: directory)
        #expect(spool?.read == 3002 && spool?.rejectedCount == 1 && spool?.rejections.first?.line == 4)
        for _ in 0..<2 {
            var back: [ImportRecord] = []
            try spool?.forEach { back.append($0) }
            #expect(back == parsed)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).count == 1)
        spool = nil
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty, "the spool's file goes with it")
    }
}
