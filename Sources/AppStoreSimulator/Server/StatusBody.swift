import NIOCore

/// Builds a response body as a few buffers: text written into one scratch buffer, interleaved
/// with shared buffers (the JWS header, identical in every payload) that are not copied.
struct StatusBody {
    private var scratch: ByteBuffer
    private var sliceStart: Int
    private var parts: [ByteBuffer] = []

    init(capacity: Int) {
        scratch = ByteBufferAllocator().buffer(capacity: capacity)
        sliceStart = scratch.writerIndex
    }

    mutating func write(_ s: String) { scratch.writeString(s) }

    mutating func write(bytes: UnsafeBufferPointer<UInt8>) { scratch.writeBytes(bytes) }

    /// Appends a shared buffer by reference.
    mutating func share(_ buffer: ByteBuffer) {
        flush()
        parts.append(buffer)
    }

    private mutating func flush() {
        let n = scratch.writerIndex - sliceStart
        if n > 0, let slice = scratch.getSlice(at: sliceStart, length: n) { parts.append(slice) }
        sliceStart = scratch.writerIndex
    }

    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Writes unpadded base64url of `bytes`.
    mutating func writeBase64URL(_ bytes: UnsafeBufferPointer<UInt8>) {
        let n = bytes.count
        let out = (n / 3) * 4 + [0, 2, 3][n % 3]
        _ = StatusBody.alphabet.withUnsafeBufferPointer { a in
            scratch.writeWithUnsafeMutableBytes(minimumWritableBytes: out) { dst in
                var i = 0, o = 0
                while i + 3 <= n {
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    dst[o] = a[Int(v >> 18)]
                    dst[o + 1] = a[Int(v >> 12 & 63)]
                    dst[o + 2] = a[Int(v >> 6 & 63)]
                    dst[o + 3] = a[Int(v & 63)]
                    i += 3
                    o += 4
                }
                if n - i == 1 {
                    let v = UInt32(bytes[i]) << 16
                    dst[o] = a[Int(v >> 18)]
                    dst[o + 1] = a[Int(v >> 12 & 63)]
                } else if n - i == 2 {
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
                    dst[o] = a[Int(v >> 18)]
                    dst[o + 1] = a[Int(v >> 12 & 63)]
                    dst[o + 2] = a[Int(v >> 6 & 63)]
                }
                return out
            }
        }
    }

    mutating func finish() -> [ByteBuffer] {
        flush()
        return parts
    }
}
