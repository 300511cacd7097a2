import Foundation

/// Fast conversion between `Date` and PostgreSQL's ISO timestamptz text
/// (`2026-11-21 10:07:00.123456+00`), microsecond precision, no formatter objects.
enum PostgresTimestamp {
    private static let microsPerSecond: Int64 = 1_000_000
    private static let secondsPerDay: Int64 = 86_400

    /// `Date` as UTC text PostgreSQL accepts; dates outside years 1...9999 become ±infinity.
    static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        guard interval.isFinite else { return interval < 0 ? "-infinity" : "infinity" }
        // Far beyond years 1...9999 (checked below) and before microseconds overflow Int64.
        guard interval < 300_000_000_000 else { return "infinity" }
        guard interval > -70_000_000_000 else { return "-infinity" }
        let micros = Int64((interval * 1_000_000).rounded())
        var seconds = micros / microsPerSecond
        var fraction = micros % microsPerSecond
        if fraction < 0 { fraction += microsPerSecond; seconds -= 1 }
        var days = seconds / secondsPerDay
        var secondOfDay = seconds % secondsPerDay
        if secondOfDay < 0 { secondOfDay += secondsPerDay; days -= 1 }
        let (y, m, d) = civil(fromDays: days)
        guard y >= 1 && y <= 9999 else { return y < 1 ? "-infinity" : "infinity" }
        var out = [UInt8]()
        out.reserveCapacity(32)
        append(y, width: 4, to: &out); out.append(0x2D)
        append(m, width: 2, to: &out); out.append(0x2D)
        append(d, width: 2, to: &out); out.append(0x20)
        append(secondOfDay / 3600, width: 2, to: &out); out.append(0x3A)
        append(secondOfDay / 60 % 60, width: 2, to: &out); out.append(0x3A)
        append(secondOfDay % 60, width: 2, to: &out)
        if fraction != 0 {
            out.append(0x2E)
            append(fraction, width: 6, to: &out)
        }
        out.append(contentsOf: [0x2B, 0x30, 0x30]) // +00
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses `YYYY-MM-DD HH:MM:SS[.f{1,6}](+|-)HH[:MM[:SS]]`, `infinity`, `-infinity`.
    /// Returns nil when the text is not of that form.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        let n = bytes.count
        if n == 8, String(decoding: bytes, as: UTF8.self) == "infinity" { return .distantFuture }
        if n == 9, String(decoding: bytes, as: UTF8.self) == "-infinity" { return .distantPast }
        var i = 0
        func digits(_ count: Int) -> Int64? {
            guard i + count <= n else { return nil }
            var v: Int64 = 0
            for k in 0..<count {
                let c = bytes[i + k]
                guard c >= 0x30 && c <= 0x39 else { return nil }
                v = v * 10 + Int64(c - 0x30)
            }
            i += count
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < n, bytes[i] == c else { return false }
            i += 1
            return true
        }
        // Years can have more than 4 digits; read until '-'.
        var year: Int64 = 0
        var yearDigits = 0
        while i < n, bytes[i] >= 0x30 && bytes[i] <= 0x39 {
            year = year * 10 + Int64(bytes[i] - 0x30)
            i += 1
            yearDigits += 1
        }
        guard yearDigits >= 4, expect(0x2D), let month = digits(2), expect(0x2D), let day = digits(2),
              i < n, bytes[i] == 0x20 || bytes[i] == 0x54 else { return nil }
        i += 1
        guard let hh = digits(2), expect(0x3A), let mm = digits(2), expect(0x3A), let ss = digits(2)
        else { return nil }
        var micros: Int64 = 0
        if i < n, bytes[i] == 0x2E {
            i += 1
            var places = 0
            while i < n, bytes[i] >= 0x30 && bytes[i] <= 0x39 {
                if places < 6 { micros = micros * 10 + Int64(bytes[i] - 0x30) }
                places += 1
                i += 1
            }
            guard places > 0 else { return nil }
            for _ in places..<max(places, 6) { micros *= 10 }
        }
        var offsetSeconds: Int64 = 0
        if i < n, bytes[i] == 0x2B || bytes[i] == 0x2D {
            let sign: Int64 = bytes[i] == 0x2D ? -1 : 1
            i += 1
            guard let oh = digits(2) else { return nil }
            var off = oh * 3600
            if expect(0x3A) {
                guard let om = digits(2) else { return nil }
                off += om * 60
                if expect(0x3A) {
                    guard let os = digits(2) else { return nil }
                    off += os
                }
            }
            offsetSeconds = sign * off
        } else if i < n, bytes[i] == 0x5A { // Z
            i += 1
        }
        guard i == n, (1...12).contains(month), (1...31).contains(day), hh < 24, mm < 60, ss < 61
        else { return nil }
        let days = days(fromCivil: year, month, day)
        let seconds = days * secondsPerDay + hh * 3600 + mm * 60 + ss - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + Double(micros) / 1_000_000)
    }

    private static func append(_ value: Int64, width: Int, to out: inout [UInt8]) {
        var digits = [UInt8](repeating: 0x30, count: width)
        var v = value
        var k = width - 1
        while k >= 0 {
            digits[k] = UInt8(0x30 + v % 10)
            v /= 10
            k -= 1
        }
        out.append(contentsOf: digits)
    }

    // Howard Hinnant's civil calendar algorithms (proleptic Gregorian).
    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }

    static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
