import Foundation

extension Chart {
    /// Per category, `up` drawn above a zero line and `down` below it, and a diamond at
    /// `up - down` (the net). For auto-renew flips: switched back on (up) and off (down).
    static func divergingBars(_ frame: Frame, categories: [String], up: Series, down: Series, label: String) -> HTML {
        let count = categories.count
        let extent = niceMaximum(max(up.values.max() ?? 0, down.values.max() ?? 0))
        let zero = frame.top + frame.plotHeight / 2
        let half = frame.plotHeight / 2
        func y(_ v: Double) -> Double { zero - half * min(max(v, -extent), extent) / extent }
        var shapes: [HTML] = [
            "<line class=\"grid\" x1=\"\(frame.left)\" y1=\"\(y(extent))\" x2=\"\(frame.width - frame.right)\" y2=\"\(y(extent))\"/>",
            "<line class=\"grid\" x1=\"\(frame.left)\" y1=\"\(y(-extent))\" x2=\"\(frame.width - frame.right)\" y2=\"\(y(-extent))\"/>",
            "<text class=\"axis\" x=\"\(frame.left - 6)\" y=\"\(y(extent) + 4)\" text-anchor=\"end\">+\(Format.count(Int(extent)))</text>",
            "<text class=\"axis\" x=\"\(frame.left - 6)\" y=\"\(zero + 4)\" text-anchor=\"end\">0</text>",
            "<text class=\"axis\" x=\"\(frame.left - 6)\" y=\"\(y(-extent) + 4)\" text-anchor=\"end\">-\(Format.count(Int(extent)))</text>",
        ]
        for i in 0..<count {
            let band = frame.band(i, of: count)
            let u = max(up.values[safe: i] ?? 0, 0), d = max(down.values[safe: i] ?? 0, 0)
            if u > 0 {
                shapes.append("<rect fill=\"\(up.color)\" x=\"\(band.x)\" y=\"\(y(u))\" width=\"\(band.width)\" height=\"\(zero - y(u))\"><title>\(categories[i]) \(up.name): \(Format.count(Int(u)))</title></rect>")
            }
            if d > 0 {
                shapes.append("<rect fill=\"\(down.color)\" x=\"\(band.x)\" y=\"\(zero)\" width=\"\(band.width)\" height=\"\(y(-d) - zero)\"><title>\(categories[i]) \(down.name): \(Format.count(Int(d)))</title></rect>")
            }
            let cx = band.x + band.width / 2, cy = y(u - d), r = min(5, band.width / 2)
            shapes.append("<path class=\"net\" d=\"M\(cx) \(cy - r) L\(cx + r) \(cy) L\(cx) \(cy + r) L\(cx - r) \(cy) Z\"><title>\(categories[i]) net: \(Format.change(Int(u - d)))</title></path>")
        }
        shapes.append("<line class=\"zero\" x1=\"\(frame.left)\" y1=\"\(zero)\" x2=\"\(frame.width - frame.right)\" y2=\"\(zero)\"/>")
        return svg(frame, label: label, shapes.joined() + xLabels(frame, categories, centered: true))
    }

    /// One row per label, its series' bars side by side (grouped) or end to end (stacked),
    /// growing to the right from a common axis.
    static func horizontalBars(labels: [String], series: [Series], stacked: Bool, label: String,
                               format: (Double) -> String = { Format.count(Int($0)) }) -> HTML {
        let rowHeight = stacked ? 22.0 : 12.0 * Double(max(series.count, 1)) + 10
        var frame = Frame(width: 720, height: 0)
        // Room for the longest label (about 7 units a character at 13px), at most half the width.
        frame.left = min(360, max(120, 7.2 * Double(labels.map(\.count).max() ?? 0) + 14))
        frame.right = 70
        frame.top = 8
        frame.bottom = 8
        frame.height = frame.top + frame.bottom + rowHeight * Double(max(labels.count, 1))
        let maximum = niceMaximum(labels.indices.map { i in
            stacked ? series.reduce(0) { $0 + max($1.values[safe: i] ?? 0, 0) } : series.map { $0.values[safe: i] ?? 0 }.max() ?? 0
        }.max() ?? 0)
        func w(_ v: Double) -> Double { frame.plotWidth * min(max(v, 0), maximum) / maximum }
        var shapes: [HTML] = []
        for (i, text) in labels.enumerated() {
            let rowTop = frame.top + rowHeight * Double(i)
            shapes.append("<text class=\"label\" x=\"\(frame.left - 8)\" y=\"\(rowTop + rowHeight / 2 + 4)\" text-anchor=\"end\">\(text)</text>")
            var x = frame.left
            for (k, s) in series.enumerated() {
                let v = max(s.values[safe: i] ?? 0, 0)
                let barY = stacked ? rowTop + 3 : rowTop + 5 + 12 * Double(k)
                let barH = stacked ? rowHeight - 6 : 10
                if v > 0 {
                    shapes.append("<rect fill=\"\(s.color)\" x=\"\(x)\" y=\"\(barY)\" width=\"\(max(w(v), 1))\" height=\"\(barH)\"><title>\(text) \(s.name): \(format(v))</title></rect>")
                }
                if stacked { x += w(v) } else {
                    shapes.append("<text class=\"axis\" x=\"\(frame.left + w(v) + 4)\" y=\"\(barY + 9)\">\(format(v))</text>")
                }
            }
            if stacked {
                let total = series.reduce(0) { $0 + max($1.values[safe: i] ?? 0, 0) }
                shapes.append("<text class=\"axis\" x=\"\(x + 4)\" y=\"\(rowTop + rowHeight / 2 + 4)\">\(format(total))</text>")
            }
        }
        shapes.append("<line class=\"zero\" x1=\"\(frame.left)\" y1=\"\(frame.top)\" x2=\"\(frame.left)\" y2=\"\(frame.height - frame.bottom)\"/>")
        return svg(frame, label: label, shapes.joined())
    }

    /// A line over points that may be missing (nil: nothing known), on a 0–100 % axis.
    static func shareLine(_ frame: Frame, categories: [String], shares: [Double?], color: String, label: String) -> HTML {
        let count = categories.count
        var segments: [[String]] = [[]]
        var dots: [HTML] = []
        for i in 0..<count {
            guard let share = shares[safe: i] ?? nil else {
                if !(segments.last?.isEmpty ?? true) { segments.append([]) }
                continue
            }
            let x = frame.x(i, of: count), y = frame.y(share, maximum: 1)
            segments[segments.count - 1].append(HTML.number(x) + "," + HTML.number(y))
            dots.append("<circle fill=\"\(color)\" cx=\"\(x)\" cy=\"\(y)\" r=\"3\"><title>\(categories[i]): \(Format.percent(share))</title></circle>")
        }
        let lines = segments.filter { $0.count > 1 }.map { points -> HTML in
            "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2.5\" points=\"\(points.joined(separator: " "))\"/>"
        }
        return svg(frame, label: label, yAxis(frame, maximum: 1, format: { String(Int(($0 * 100).rounded())) + " %" })
                   + lines.joined() + dots.joined() + xLabels(frame, categories, centered: false))
    }

    /// The legend of a chart: a swatch and a name per series, as HTML (wraps on phones).
    static func legend(_ items: [(name: String, color: String)]) -> HTML {
        let entries = items.map { item -> HTML in
            "<li><span class=\"swatch\" style=\"background:\(item.color)\"></span>\(item.name)</li>"
        }
        return "<ul class=\"legend\">\(entries)</ul>"
    }
}
