import Foundation
import Testing
@testable import ChurnInput

/// One line reader for an import's JSON lines and a file of notifications: lines across the
/// 64 KiB reads, empty lines, a last line without a newline, lines over the limit skipped.
@Suite struct LineReaderTests {
    func lines(_ data: Data, max: Int = .max) throws -> [String] {
        var reader = LineReader(try ImportByteReader(.data(data)), maxLineBytes: max)
        var out: [String] = []
        while let (number, line) = try reader.next() {
            switch line {
            case .bytes(let b): out.append("\(number):\(String(decoding: b, as: UTF8.self))")
            case .tooLong: out.append("\(number):too long")
            }
        }
        return out
    }

    @Test func linesEmptyLinesAndALastLineWithoutNewline() throws {
        #expect(try lines(Data("a\n\nbc\nd".utf8)) == ["1:a", "2:", "3:bc", "4:d"])
        #expect(try lines(Data("a\n".utf8)) == ["1:a"])
        #expect(try lines(Data()).isEmpty)
    }

    @Test func linesAcrossReadsAndOverTheLimit() throws {
        let chunk = ImportByteReader.chunkSize
        let long = String(repeating: "x", count: chunk + 10)   // spans two reads
        let huge = String(repeating: "y", count: 3 * chunk)    // over the limit below, across reads
        let text = "first\n\(long)\n\(huge)\nlast\n"
        let all = try lines(Data(text.utf8))
        #expect(all.count == 4 && all[1] == "2:\(long)" && all[3] == "4:last")
        let bounded = try lines(Data(text.utf8), max: 2 * chunk)
        #expect(bounded == ["1:first", "2:\(long)", "3:too long", "4:last"])
        // Exactly at the limit is kept; one byte more is not.
        #expect(try lines(Data("abc\nabcd\n".utf8), max: 3) == ["1:abc", "2:too long"])
    }

    @Test func aFileReadThroughItsHandle() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("churnwatch-lines-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        let body = (0..<5000).map { "line \($0) " + String(repeating: "z", count: $0 % 97) }.joined(separator: "\n")
        try Data(body.utf8).write(to: url)
        var reader = LineReader(handle: try FileHandle(forReadingFrom: url))
        var count = 0
        while let (number, line) = try reader.next() {
            guard case .bytes(let b) = line else { Issue.record("line \(number) too long"); return }
            #expect(String(decoding: b, as: UTF8.self).hasPrefix("line \(number - 1) "))
            count += 1
        }
        #expect(count == 5000)
    }
}
