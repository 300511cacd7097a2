import Foundation

/// A data series of a chart: a name for the legend, a fixed colour, one value per category.
public struct Series: Sendable, Equatable {
    public var name: String
    public var color: String
    public var values: [Double]

    public init(name: String, color: String, values: [Double]) {
        self.name = name
        self.color = color
        self.values = values
    }
}

/// The drawing area of a chart and its mapping from values to SVG coordinates. Every chart uses
/// a fixed viewBox (`width` × `height`) that CSS scales to the page, so phones and print get the
/// same picture.
public struct Frame: Sendable, Equatable {
    public var width: Double = 720
    public var height: Double = 240
    public var left: Double = 56
    public var right: Double = 12
    public var top: Double = 12
    public var bottom: Double = 36

    public init(width: Double = 720, height: Double = 240) {
        self.width = width
        self.height = height
    }

    public var plotWidth: Double { width - left - right }
    public var plotHeight: Double { height - top - bottom }
    public var baseline: Double { top + plotHeight }

    /// The y coordinate of `value` on a 0...`maximum` axis (a maximum of 0 draws everything on
    /// the baseline).
    public func y(_ value: Double, maximum: Double) -> Double {
        guard maximum > 0 else { return baseline }
        return baseline - plotHeight * min(max(value, 0), maximum) / maximum
    }

    /// The x coordinate of point `i` of `count` spread edge to edge (one point: the middle).
    public func x(_ i: Int, of count: Int) -> Double {
        guard count > 1 else { return left + plotWidth / 2 }
        return left + plotWidth * Double(i) / Double(count - 1)
    }

    /// The left edge and width of band `i` of `count` equal bands (bars), with a gap.
    public func band(_ i: Int, of count: Int) -> (x: Double, width: Double) {
        let step = plotWidth / Double(max(count, 1))
        let gap = min(step * 0.2, 8)
        return (left + step * Double(i) + gap / 2, max(step - gap, 1))
    }
}

/// A "nice" axis maximum at or above `value` for an axis of four equal steps: each step 1, 1.5,
/// 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten, at least 1 (so counts get whole-number ticks).
public func niceMaximum(_ value: Double) -> Double {
    guard value > 0, value.isFinite else { return 4 }
    let step = value / 4
    guard step > 1 else { return 4 }
    let magnitude = pow(10, floor(log10(step)))
    for factor in [1.0, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10] where factor * magnitude >= step && (factor * magnitude).rounded() == factor * magnitude {
        return 4 * factor * magnitude
    }
    return 40 * magnitude
}

enum Chart {
    /// The `<svg>` element around a chart's shapes, labelled for screen readers, in a box that
    /// scrolls sideways on a phone rather than shrinking the labels below reading size.
    static func svg(_ frame: Frame, label: String, _ body: HTML) -> HTML {
        """
        <div class="chartbox"><svg class="chart" viewBox="0 0 \(frame.width) \(frame.height)" role="img" aria-label="\(label)" \
        preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg"><title>\(label)</title>\(body)</svg></div>
        """
    }

    /// Horizontal grid lines with value labels at 0, ¼, ½, ¾ and the maximum.
    static func yAxis(_ frame: Frame, maximum: Double, format: (Double) -> String) -> HTML {
        var out: [HTML] = []
        for i in 0...4 {
            let value = maximum * Double(i) / 4
            let y = frame.y(value, maximum: maximum)
            out.append("""
                <line class="grid" x1="\(frame.left)" y1="\(y)" x2="\(frame.width - frame.right)" y2="\(y)"/>\
                <text class="axis" x="\(frame.left - 6)" y="\(y + 4)" text-anchor="end">\(format(value))</text>
                """)
        }
        return out.joined()
    }

    /// Category labels under the plot: all of them when they fit, else first, middle and last.
    static func xLabels(_ frame: Frame, _ labels: [String], centered: Bool) -> HTML {
        guard !labels.isEmpty else { return "" }
        let fit = labels.count <= Int(frame.plotWidth / 72)
        let shown = fit ? Array(labels.indices) : Array(Set([0, labels.count / 2, labels.count - 1])).sorted()
        return shown.map { i -> HTML in
            let band = frame.band(i, of: labels.count)
            let x = centered ? band.x + band.width / 2 : frame.x(i, of: labels.count)
            // Points spread edge to edge: the first label starts at its point, the last ends there.
            let anchor: String
            if centered || labels.count == 1 || (i > 0 && i < labels.count - 1) {
                anchor = "middle"
            } else {
                anchor = i == 0 ? "start" : "end"
            }
            return "<text class=\"axis\" x=\"\(x)\" y=\"\(frame.height - 12)\" text-anchor=\"\(anchor)\">\(labels[i])</text>"
        }.joined()
    }

    /// Areas stacked bottom to top, one per series, over categories (days) spread edge to edge.
    /// A single day is drawn as a band across the whole plot.
    static func stackedArea(_ frame: Frame, categories: [String], series: [Series], label: String) -> HTML {
        let count = categories.count
        let totals = (0..<count).map { i in series.reduce(0) { $0 + ($1.values[safe: i] ?? 0) } }
        let maximum = niceMaximum(totals.max() ?? 0)
        var lower = [Double](repeating: 0, count: count)
        var shapes: [HTML] = []
        func xs(_ i: Int) -> [Double] {
            count == 1 ? [frame.left, frame.left + frame.plotWidth] : [frame.x(i, of: count)]
        }
        for s in series {
            let upper = (0..<count).map { lower[$0] + (s.values[safe: $0] ?? 0) }
            var points: [String] = []
            for i in 0..<count { for x in xs(i) { points.append(HTML.number(x) + "," + HTML.number(frame.y(upper[i], maximum: maximum))) } }
            for i in (0..<count).reversed() { for x in xs(i).reversed() { points.append(HTML.number(x) + "," + HTML.number(frame.y(lower[i], maximum: maximum))) } }
            shapes.append("<polygon fill=\"\(s.color)\" stroke=\"#ffffff\" stroke-width=\"0.5\" points=\"\(points.joined(separator: " "))\"><title>\(s.name)</title></polygon>")
            lower = upper
        }
        return svg(frame, label: label, yAxis(frame, maximum: maximum, format: { Format.count(Int($0)) }) + shapes.joined()
                   + xLabels(frame, categories, centered: false))
    }

    /// Bars stacked per category (values below zero are drawn as zero).
    static func stackedBars(_ frame: Frame, categories: [String], series: [Series], label: String) -> HTML {
        let count = categories.count
        let totals = (0..<count).map { i in series.reduce(0) { $0 + max($1.values[safe: i] ?? 0, 0) } }
        let maximum = niceMaximum(totals.max() ?? 0)
        var shapes: [HTML] = []
        for i in 0..<count {
            var base = 0.0
            let band = frame.band(i, of: count)
            for s in series {
                let v = max(s.values[safe: i] ?? 0, 0)
                guard v > 0 else { continue }
                let top = frame.y(base + v, maximum: maximum), bottom = frame.y(base, maximum: maximum)
                shapes.append("""
                    <rect fill="\(s.color)" x="\(band.x)" y="\(top)" width="\(band.width)" height="\(max(bottom - top, 0))">\
                    <title>\(categories[i]) \(s.name): \(Format.count(Int(v)))</title></rect>
                    """)
                base += v
            }
        }
        return svg(frame, label: label, yAxis(frame, maximum: maximum, format: { Format.count(Int($0)) }) + shapes.joined()
                   + xLabels(frame, categories, centered: true))
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
