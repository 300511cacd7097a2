/// A minimal JSON writer for large, hand-shaped documents (truth, events) where JSONEncoder would
/// cost more than the data; keys are written in the order given.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma: [Bool] = [false]

    init(capacity: Int = 4096) { bytes.reserveCapacity(capacity) }

    private mutating func separator() {
        if needsComma[needsComma.count - 1] { bytes.append(UInt8(ascii: ",")) }
        needsComma[needsComma.count - 1] = true
    }

    mutating func beginObject(_ key: String? = nil) { open(key, "{") }
    mutating func beginArray(_ key: String? = nil) { open(key, "[") }
    mutating func endObject() { close("}") }
    mutating func endArray() { close("]") }

    private mutating func open(_ key: String?, _ c: Unicode.Scalar) {
        separator()
        if let key { writeKey(key) }
        bytes.append(UInt8(ascii: c))
        needsComma.append(false)
    }

    private mutating func close(_ c: Unicode.Scalar) {
        needsComma.removeLast()
        bytes.append(UInt8(ascii: c))
    }

    private mutating func writeKey(_ key: String) {
        writeString(key)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func string(_ key: String?, _ value: String?) {
        separator()
        if let key { writeKey(key) }
        if let value { writeString(value) } else { bytes.append(contentsOf: "null".utf8) }
    }

    mutating func int(_ key: String?, _ value: Int64?) {
        separator()
        if let key { writeKey(key) }
        bytes.append(contentsOf: (value.map { String($0) } ?? "null").utf8)
    }

    mutating func bool(_ key: String?, _ value: Bool?) {
        separator()
        if let key { writeKey(key) }
        bytes.append(contentsOf: (value.map { $0 ? "true" : "false" } ?? "null").utf8)
    }

    /// A finite number in its shortest form (null when nil or not finite).
    mutating func double(_ key: String?, _ value: Double?) {
        separator()
        if let key { writeKey(key) }
        bytes.append(contentsOf: (value.flatMap { $0.isFinite ? "\($0)" : nil } ?? "null").utf8)
    }

    /// A date as ISO 8601 (null when nil).
    mutating func date(_ key: String?, _ ms: Int64?) { string(key, ms.map(SimTime.format)) }

    private mutating func writeString(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [92, 92])
            case 0x0A: bytes.append(contentsOf: [92, 110])
            case 0x0D: bytes.append(contentsOf: [92, 114])
            case 0x09: bytes.append(contentsOf: [92, 116])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [92, 117, 48, 48, hex[Int(b >> 4)], hex[Int(b & 15)]])
            default: bytes.append(b)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
