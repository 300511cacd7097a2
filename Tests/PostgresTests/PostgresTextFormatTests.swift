import Foundation
@testable import Postgres
import Testing

@Suite("text formats (no server)")
struct PostgresTextFormatTests {
    @Test("timestamps format and parse", arguments: [
        ("2026-11-21 10:07:00+00", 1_795_255_620.0),
        ("2026-11-21 10:07:00.5+00", 1_795_255_620.5),
        ("2026-11-21 15:37:00.000001+05:30", 1_795_255_620.000001),
        ("2026-11-21 02:07:00-08", 1_795_255_620.0),
        ("1970-01-01 00:00:00+00", 0.0),
        ("1969-12-31 23:59:59.999+00", -0.001),
        ("2000-02-29 00:00:00+00", 951_782_400.0),
        ("2026-11-21T10:07:00Z", 1_795_255_620.0),
        ("10000-01-01 00:00:00+00", 253_402_300_800.0),
    ])
    func parse(text: String, epoch: Double) {
        let d = Array(text.utf8).withUnsafeBufferPointer { PostgresTimestamp.parse($0) }
        #expect(d != nil)
        if let d { #expect(abs(d.timeIntervalSince1970 - epoch) < 0.000_000_5) }
    }

    @Test("bad timestamps are rejected", arguments: ["", "2026-13-01 00:00:00+00", "2026-11-21", "yesterday", "2026-11-21 10:07:00+0x"])
    func parseBad(text: String) {
        #expect(Array(text.utf8).withUnsafeBufferPointer { PostgresTimestamp.parse($0) } == nil)
    }

    @Test("dates far outside years 1...9999 format as ±infinity instead of trapping (issue 18 item 5)")
    func formatOutOfRange() {
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 8.64e15)) == "infinity")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: -8.64e15)) == "-infinity")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 253_402_300_800)) == "infinity")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 253_402_300_799)) == "9999-12-31 23:59:59+00")
    }

    @Test("formatting round-trips at microsecond precision")
    func formatRoundTrip() {
        for epoch in [0.0, 1.000001, -86_400.25, 1_795_255_620.123456, 4_102_444_800.999999] {
            let text = PostgresTimestamp.format(Date(timeIntervalSince1970: epoch))
            let back = Array(text.utf8).withUnsafeBufferPointer { PostgresTimestamp.parse($0) }
            #expect(back.map { abs($0.timeIntervalSince1970 - epoch) < 0.000_001 } == true, "\(text)")
        }
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 0)) == "1970-01-01 00:00:00+00")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 1.5)) == "1970-01-01 00:00:01.500000+00")
    }

    @Test("array literals parse quotes, escapes and NULL")
    func arrays() throws {
        func parse(_ s: String) throws -> [String?] {
            try Array(s.utf8).withUnsafeBufferPointer { try [String?].decode(postgresText: $0) }
        }
        #expect(try parse("{}") == [])
        #expect(try parse("{a,b}") == ["a", "b"])
        #expect(try parse(#"{"a b","c,d",NULL,"NULL","q\"x","s\\y"}"#) == ["a b", "c,d", nil, "NULL", "q\"x", "s\\y"])
        #expect(throws: PostgresDecodingFailure.self) { try parse("{a,{b}}") }
        #expect(throws: PostgresDecodingFailure.self) { try parse("a,b") }
        #expect(["a\"b", "c\\d", nil].postgresText == #"{"a\"b","c\\d",NULL}"#)
    }

    @Test("integers reject overflow and junk")
    func integers() throws {
        func parse(_ s: String) throws -> Int64 { try Array(s.utf8).withUnsafeBufferPointer { try Int64.decode(postgresText: $0) } }
        #expect(try parse("-9223372036854775808") == .min)
        #expect(try parse("9223372036854775807") == .max)
        #expect(throws: PostgresDecodingFailure.self) { try parse("9223372036854775808") }
        #expect(throws: PostgresDecodingFailure.self) { try parse("12a") }
        #expect(throws: PostgresDecodingFailure.self) { try parse("") }
    }
}

@Suite("JSON written without an encoder")
struct PostgresJSONWritingTests {
    static let tricky = ["plain", "", "quote\"back\\slash/", "line\nfeed\r\ttab", "\u{01}\u{1F}\u{7F}", "ünïcødé 🚀", "{\"not\": \"json\"}"]

    @Test("an object of strings is the text JSONEncoder writes with sorted keys, and parses back to the same values")
    func objectMatchesTheEncoder() throws {
        var object: [String: String] = [:]
        for (i, value) in Self.tricky.enumerated() { object["k\(i)\(value)"] = value }
        let written = PostgresJSON(object: object)
        #expect(written.text == (try PostgresJSON(encoding: object)).text)
        #expect(try JSONDecoder().decode([String: String].self, from: Data(written.text.utf8)) == object)
        #expect(PostgresJSON(object: [:]).text == "{}")
    }

    @Test("an array of strings parses back to the same strings")
    func arrayRoundTrips() throws {
        let written = PostgresJSON(array: Self.tricky)
        #expect(try JSONDecoder().decode([String].self, from: Data(written.text.utf8)) == Self.tricky)
        #expect(written.text == (try PostgresJSON(encoding: Self.tricky)).text)
        #expect(PostgresJSON(array: []).text == "[]")
    }
}
