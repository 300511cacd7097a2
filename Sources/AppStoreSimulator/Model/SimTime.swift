/// Time helpers for the simulator: everything is integer milliseconds since 1970 (UTC), as
/// Apple sends it. Calendar arithmetic is proleptic Gregorian in UTC (Howard Hinnant's civil
/// date algorithms), so generation never touches Foundation's calendar and stays fast and
/// deterministic.
public enum SimTime {
    public static let second: Int64 = 1_000
    public static let minute: Int64 = 60_000
    public static let hour: Int64 = 3_600_000
    public static let day: Int64 = 86_400_000

    /// Days since 1970-01-01 of a civil date.
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The civil date of a day count since 1970-01-01.
    static func civilFromDays(_ z0: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    private static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }

    /// `ms` plus `months` calendar months, keeping the time of day and clamping the day to the
    /// end of a shorter month (Jan 31 + 1 month = Feb 28/29), as App Store renewals do.
    public static func addMonths(_ ms: Int64, _ months: Int) -> Int64 {
        let days = floorDiv(ms, day)
        let timeOfDay = ms - days * day
        let c = civilFromDays(days)
        let total = c.year * 12 + (c.month - 1) + Int64(months)
        let y = floorDiv(total, 12)
        let m = total - y * 12 + 1
        let d = min(c.day, daysInMonth(year: y, month: m))
        return daysFromCivil(year: y, month: m, day: d) * day + timeOfDay
    }

    /// ISO 8601 in UTC: `2026-01-01T00:00:00Z`, with `.SSS` only when the milliseconds are not 0.
    public static func format(_ ms: Int64) -> String {
        let days = floorDiv(ms, day)
        var rest = ms - days * day
        let c = civilFromDays(days)
        let h = rest / hour; rest -= h * hour
        let mi = rest / minute; rest -= mi * minute
        let s = rest / second; rest -= s * second
        func p(_ v: Int64, _ w: Int) -> String {
            let t = String(v)
            return t.count >= w ? t : String(repeating: "0", count: w - t.count) + t
        }
        var out = "\(p(c.year, 4))-\(p(c.month, 2))-\(p(c.day, 2))T\(p(h, 2)):\(p(mi, 2)):\(p(s, 2))"
        if rest != 0 { out += "." + p(rest, 3) }
        return out + "Z"
    }

    /// Parses ISO 8601: `YYYY-MM-DD`, or `YYYY-MM-DDTHH:MM[:SS[.fff]]` followed by `Z` or
    /// `±HH:MM` (no zone means UTC). `nil` for anything else.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func num(_ width: Int) -> Int64? {
            guard i + width <= b.count else { return nil }
            var v: Int64 = 0
            for j in i..<i + width {
                guard b[j] >= 48, b[j] <= 57 else { return nil }
                v = v * 10 + Int64(b[j] - 48)
            }
            i += width
            return v
        }
        func expect(_ c: Character) -> Bool {
            guard i < b.count, b[i] == c.asciiValue! else { return false }
            i += 1
            return true
        }
        guard let y = num(4), expect("-"), let mo = num(2), expect("-"), let d = num(2),
            (1...12).contains(mo), d >= 1, d <= daysInMonth(year: y, month: mo)
        else { return nil }
        var ms = daysFromCivil(year: y, month: mo, day: d) * day
        if i == b.count { return ms }
        guard expect("T") || expect(" "), let h = num(2), expect(":"), let mi = num(2), h < 24, mi < 60
        else { return nil }
        ms += h * hour + mi * minute
        if i < b.count, b[i] == UInt8(ascii: ":") {
            i += 1
            guard let s = num(2), s < 61 else { return nil }
            ms += s * second
            if i < b.count, b[i] == UInt8(ascii: ".") {
                i += 1
                var digits = 0
                var frac: Int64 = 0
                while i < b.count, b[i] >= 48, b[i] <= 57 {
                    if digits < 3 { frac = frac * 10 + Int64(b[i] - 48) }
                    digits += 1
                    i += 1
                }
                guard digits > 0 else { return nil }
                for _ in digits..<max(digits, 3) { frac *= 10 }
                ms += frac
            }
        }
        if i == b.count { return ms }
        if expect("Z") { return i == b.count ? ms : nil }
        // A "+" left unencoded in a query string arrives as a space.
        guard i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") || b[i] == UInt8(ascii: " ") else {
            return nil
        }
        let sign: Int64 = b[i] == UInt8(ascii: "-") ? -1 : 1
        i += 1
        guard let oh = num(2) else { return nil }
        _ = expect(":")
        guard let om = num(2), i == b.count else { return nil }
        return ms - sign * (oh * hour + om * minute)
    }

    /// Parses a duration such as `1d`, `12h`, `90m`, `30s`, `500ms`, `2w`, or a sum `1d12h`.
    /// `nil` for anything else or zero length.
    public static func parseDuration(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard !b.isEmpty else { return nil }
        var i = 0
        var total: Int64 = 0
        var negative = false
        if b[0] == UInt8(ascii: "-") { negative = true; i = 1 }
        while i < b.count {
            var v: Int64 = 0
            let start = i
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                v = v * 10 + Int64(b[i] - 48)
                i += 1
                if v > 1_000_000_000 { return nil }
            }
            guard i > start else { return nil }
            var unit = ""
            while i < b.count, !(b[i] >= 48 && b[i] <= 57) {
                unit.append(Character(UnicodeScalar(b[i])))
                i += 1
            }
            switch unit {
            case "ms": total += v
            case "s": total += v * second
            case "m": total += v * minute
            case "h": total += v * hour
            case "d": total += v * day
            case "w": total += v * 7 * day
            default: return nil
            }
        }
        return negative ? -total : total
    }
}
