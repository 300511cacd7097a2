import Foundation

/// Where an import's bytes come from: bytes in memory, or a file read in chunks (never whole).
enum ImportSource: Sendable {
    case data(Data)
    case file(URL)
}

/// Reads an import source one byte at a time through a 64 KiB buffer: memory stays bounded
/// whatever the file's size or the length of its lines.
struct ImportByteReader {
    private var handle: FileHandle?
    private var buffer: [UInt8] = []
    private var index = 0
    private var data: Data?
    private var dataIndex: Data.Index

    static let chunkSize = 1 << 16

    /// Bytes of an open file (standard input, say), read to its end.
    init(handle: FileHandle) {
        self.handle = handle
        dataIndex = 0
    }

    init(_ source: ImportSource) throws {
        switch source {
        case .data(let d):
            data = d
            dataIndex = d.startIndex
        case .file(let url):
            dataIndex = 0
            handle = try Self.open(url)
        }
    }

    /// Opens a regular file (or a pipe, a device) for reading, or says in one line why not.
    static func open(_ url: URL) throws -> FileHandle {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw ImportFileError("cannot read \(url.path): no such file")
        }
        guard !isDirectory.boolValue else {
            throw ImportFileError("cannot read \(url.path): it is a directory; give the import file (CSV or JSON lines) itself")
        }
        do {
            return try FileHandle(forReadingFrom: url)
        } catch {
            let why = FileManager.default.isReadableFile(atPath: url.path) ? "it cannot be opened" : "permission denied"
            throw ImportFileError("cannot read \(url.path): \(why)")
        }
    }

    /// The next byte, or nil at the end.
    mutating func next() throws -> UInt8? {
        if index < buffer.count {
            defer { index += 1 }
            return buffer[index]
        }
        if let data {
            guard dataIndex < data.endIndex else { return nil }
            let end = data.index(dataIndex, offsetBy: Self.chunkSize, limitedBy: data.endIndex) ?? data.endIndex
            buffer = Array(data[dataIndex..<end])
            dataIndex = end
        } else if let handle {
            let chunk: Data?
            do {
                chunk = try handle.read(upToCount: Self.chunkSize)
            } catch {
                throw ImportFileError("cannot read the input file: \((error as NSError).localizedFailureReason ?? "read error"); check the file and the disk")
            }
            guard let chunk, !chunk.isEmpty else {
                try? handle.close()
                self.handle = nil
                return nil
            }
            buffer = Array(chunk)
        } else {
            return nil
        }
        index = 1
        return buffer[0]
    }

    /// The bytes up to the next newline (consumed, not returned), or to the end; nil at the end.
    /// More than `maxBytes` of them are not kept: the rest of the line is passed over and the
    /// answer is `.tooLong`. The buffer is searched with memchr, not byte by byte.
    mutating func line(maxBytes: Int) throws -> LineReader.Line? {
        var out: [UInt8] = []
        var spansReads = false
        while true {
            if index >= buffer.count {
                guard try next() != nil else { return spansReads ? .bytes(out[...]) : nil }
                index = 0  // the chunk just read: from its first byte
            }
            let start = index
            let found = newline(from: start)
            let end = found ?? buffer.count
            guard end - start <= maxBytes - out.count else {
                index = end
                if found == nil { try skipPastNewline() } else { index += 1 }
                return .tooLong
            }
            index = found.map { $0 + 1 } ?? buffer.count
            // A line within one read is a slice of the buffer, not a copy.
            if found != nil, !spansReads { return .bytes(buffer[start..<end]) }
            out.append(contentsOf: buffer[start..<end])
            spansReads = true
            if found != nil { return .bytes(out[...]) }
        }
    }

    /// Consumes everything up to and including the next newline (or to the end), a buffer at a
    /// time: an over-long line is passed over without being looked at byte by byte.
    mutating func skipPastNewline() throws {
        while true {
            if let found = newline(from: index) {
                index = found + 1
                return
            }
            index = buffer.count
            guard try next() != nil else { return }
            index = 0  // the chunk just read: scan it from its first byte
        }
    }

    /// The index of the buffer's first line feed at or after `from` (memchr).
    private func newline(from: Int) -> Int? {
        buffer.withUnsafeBufferPointer { p in
            guard from < p.count, let base = p.baseAddress, let hit = memchr(base + from, 0x0A, p.count - from) else { return nil }
            return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// The first byte that is not white space or a UTF-8 byte order mark, without consuming
    /// anything: decides between CSV and JSON lines.
    mutating func peekFirstSignificantByte() throws -> UInt8? {
        if buffer.isEmpty {
            guard try next() != nil else { return nil }
            index = 0  // not consumed
        }
        return buffer.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 && $0 != 0xEF && $0 != 0xBB && $0 != 0xBF }
    }
}

/// Input text checks shared by CSV and JSON lines.
enum ImportText {
    /// The bytes as a string, or why a line holding them is rejected: PostgreSQL's text cannot
    /// hold a NUL, and invalid UTF-8 would be stored as U+FFFD without a word.
    static func string(_ bytes: [UInt8], field: String) -> Result<String, ImportLineProblem> {
        if bytes.contains(0) { return .failure(.init("\(field) holds a NUL byte")) }
        guard let s = String(validating: bytes, as: UTF8.self) else { return .failure(.init("\(field) is not valid UTF-8")) }
        return .success(s)
    }

    /// Text from the input, fit for a one-line message: at most `limit` characters, control
    /// characters and non-ASCII escaped, so binary or huge input cannot flood a terminal or a log.
    static func quoted(_ text: String, limit: Int = 60) -> String {
        var out = ""
        var count = 0
        for scalar in text.unicodeScalars {
            guard count < limit else { out += "…"; break }
            if scalar.value >= 0x20 && scalar.value < 0x7F && scalar != "\"" && scalar != "\\" {
                out.unicodeScalars.append(scalar)
            } else {
                out += scalar.escaped(asASCII: true)
            }
            count += 1
        }
        return "\"\(out)\""
    }
}

/// Why one line of an import is rejected (the line number is added by the caller).
struct ImportLineProblem: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

/// RFC 4180 records from a byte stream: quoted fields may hold commas, quotes ("") and
/// newlines. A record longer than `maxRecordBytes` is not kept in memory: it is skipped to the
/// end of its line and reported.
struct CSVReader {
    enum Record {
        case fields([String])
        case rejected(String)
    }

    private var bytes: ImportByteReader
    let maxRecordBytes: Int
    private(set) var line = 0

    init(_ bytes: ImportByteReader, maxRecordBytes: Int) {
        self.bytes = bytes
        self.maxRecordBytes = maxRecordBytes
    }

    /// The next record and the line it starts on, or nil at the end.
    mutating func next() throws -> (Int, Record)? {
        guard var c = try bytes.next() else { return nil }
        line += 1
        let startLine = line
        var raw: [[UInt8]] = []
        var field: [UInt8] = []
        var size = 0
        var inQuotes = false
        // A quote inside a quoted field: the end of the field, or the first of a doubled quote.
        var quoteSeen = false
        while true {
            if quoteSeen && c != 0x22 { inQuotes = false }
            if inQuotes {
                if quoteSeen {
                    field.append(0x22)  // "" inside quotes is one quote
                    size += 1
                    quoteSeen = false
                } else if c == 0x22 {
                    quoteSeen = true
                } else {
                    if c == 0x0A { line += 1 }
                    field.append(c)
                    size += 1
                }
            } else {
                quoteSeen = false
                if c == 0x22 && field.isEmpty {
                    inQuotes = true
                } else if c == 0x2C {
                    raw.append(field)
                    field.removeAll(keepingCapacity: true)
                } else if c == 0x0A {
                    break
                } else {
                    field.append(c)
                    size += 1
                }
            }
            if size > maxRecordBytes {
                try skipLine()
                return (startLine, .rejected("longer than \(maxRecordBytes) bytes"))
            }
            guard let n = try bytes.next() else {
                if inQuotes && !quoteSeen { throw ImportFileError("line \(startLine): a quoted field is never closed") }
                break
            }
            c = n
        }
        if field.last == 0x0D { field.removeLast() }
        raw.append(field)
        var fields: [String] = []
        for (i, f) in raw.enumerated() {
            switch ImportText.string(f, field: "field \(i + 1)") {
            case .success(let s): fields.append(s)
            case .failure(let problem): return (startLine, .rejected(problem.reason))
            }
        }
        return (startLine, .fields(fields))
    }

    /// Drops the rest of an over-long record up to the next newline (quotes no longer count).
    private mutating func skipLine() throws {
        try bytes.skipPastNewline()
    }
}

/// Lines of a byte stream (an import's JSON lines, a file of notifications), each at most
/// `maxLineBytes` (longer ones are skipped, not kept).
public struct LineReader {
    public enum Line: Sendable {
        /// The line's bytes, valid until the next call.
        case bytes(ArraySlice<UInt8>)
        case tooLong
    }

    private var bytes: ImportByteReader
    public let maxLineBytes: Int
    public private(set) var line = 0

    init(_ bytes: ImportByteReader, maxLineBytes: Int) {
        self.bytes = bytes
        self.maxLineBytes = maxLineBytes
    }

    /// The lines of an open file (standard input, say), in 64 KiB reads.
    public init(handle: FileHandle, maxLineBytes: Int = .max) {
        self.init(ImportByteReader(handle: handle), maxLineBytes: maxLineBytes)
    }

    /// The next line's number and bytes (without its newline), or nil at the end.
    public mutating func next() throws -> (Int, Line)? {
        guard let read = try bytes.line(maxBytes: maxLineBytes) else { return nil }
        line += 1
        return (line, read)
    }
}
