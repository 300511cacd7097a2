import Foundation

/// Buffers COPY text-format rows and hands full chunks to libpq.
public struct PostgresCopyWriter {
    private var buffer: [UInt8] = []
    private let send: ([UInt8]) throws -> Void
    static let chunkSize = 256 * 1024

    init(send: @escaping ([UInt8]) throws -> Void) {
        self.send = send
        buffer.reserveCapacity(Self.chunkSize + 4096)
    }

    /// Appends one row. Values use the same text forms as query parameters; nil is NULL.
    public mutating func row(_ values: [any PostgresEncodable]) throws {
        for (i, value) in values.enumerated() {
            if i > 0 { buffer.append(0x09) }
            let bind = value.postgresBind
            if let text = bind.text {
                Self.appendEscaped(text, to: &buffer)
            } else {
                buffer.append(0x5C); buffer.append(0x4E) // \N
            }
        }
        buffer.append(0x0A)
        if buffer.count >= Self.chunkSize { try flush() }
    }

    /// Appends one row of already-text fields (nil is NULL).
    public mutating func row(texts: [String?]) throws {
        for (i, field) in texts.enumerated() {
            if i > 0 { buffer.append(0x09) }
            if let field { Self.appendEscaped(field, to: &buffer) } else { buffer.append(0x5C); buffer.append(0x4E) }
        }
        buffer.append(0x0A)
        if buffer.count >= Self.chunkSize { try flush() }
    }

    mutating func flush() throws {
        guard !buffer.isEmpty else { return }
        try send(buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    /// COPY text format: backslash, tab, newline and carriage return are escaped.
    static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case 0x5C: out.append(0x5C); out.append(0x5C)
            case 0x09: out.append(0x5C); out.append(0x74)
            case 0x0A: out.append(0x5C); out.append(0x6E)
            case 0x0D: out.append(0x5C); out.append(0x72)
            default: out.append(byte)
            }
        }
    }
}
