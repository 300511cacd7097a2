@testable import ChurnReport
import Foundation
import Testing

@Suite("report charts: SVG geometry")
struct ChartGeometryTests {
    /// Every number in the geometry attributes of an SVG, by attribute name.
    static func coordinates(_ svg: String) -> [(String, Double)] {
        let pattern = try! NSRegularExpression(pattern: #"\b(x|y|x1|x2|y1|y2|cx|cy|width|height|points|d)="([^"]*)""#)
        var out: [(String, Double)] = []
        for m in pattern.matches(in: svg, range: NSRange(svg.startIndex..., in: svg)) {
            let name = String(svg[Range(m.range(at: 1), in: svg)!])
            let value = String(svg[Range(m.range(at: 2), in: svg)!])
            for token in value.split(whereSeparator: { " ,MLZ".contains($0) }) {
                if let n = Double(token) { out.append((name, n)) }
            }
        }
        return out
    }

    /// The viewBox width and height.
    static func viewBox(_ svg: String) -> (Double, Double) {
        let r = svg.range(of: "viewBox=\"0 0 ")!
        let parts = svg[r.upperBound...].prefix { $0 != "\"" }.split(separator: " ").compactMap { Double($0) }
        return (parts[0], parts[1])
    }

    /// Every coordinate finite and inside the viewBox; lengths not negative.
    static func expectInside(_ svg: String, _ what: String) {
        let (w, h) = viewBox(svg)
        let coords = coordinates(svg)
        #expect(!coords.isEmpty, "\(what): no shapes")
        for (name, v) in coords {
            #expect(v.isFinite && v >= 0, "\(what): \(name)=\(v)")
            #expect(v <= max(w, h) + 0.01, "\(what): \(name)=\(v) outside \(w)×\(h)")
            if ["y", "y1", "y2", "cy", "height"].contains(name) { #expect(v <= h + 0.01, "\(what): \(name)=\(v) below \(h)") }
            if ["x", "x1", "x2", "cx", "width"].contains(name) { #expect(v <= w + 0.01, "\(what): \(name)=\(v) right of \(w)") }
        }
        #expect(!svg.contains("nan") && !svg.contains("inf"), "\(what)")
    }

    @Test("a frame maps 0 to the baseline and the maximum to the top; bands tile the plot")
    func frame() {
        let f = Frame(width: 720, height: 240)
        #expect(f.y(0, maximum: 100) == f.baseline)
        #expect(f.y(100, maximum: 100) == f.top)
        #expect(f.y(250, maximum: 100) == f.top, "values above the maximum are clamped")
        #expect(f.y(5, maximum: 0) == f.baseline, "an all-zero chart sits on the baseline")
        let last = f.band(9, of: 10)
        #expect(last.x + last.width <= f.left + f.plotWidth + 0.001)
        #expect(f.band(0, of: 10).x >= f.left)
        #expect(f.x(0, of: 1) == f.left + f.plotWidth / 2)
    }

    @Test("nice maxima are at or above the value and split into four whole steps", arguments: [0.0, 1, 3, 4, 5, 47, 99, 100, 101, 988, 12_345, 999_999])
    func niceMaxima(value: Double) {
        let m = niceMaximum(value)
        #expect(m >= value)
        #expect((m / 4).rounded() == m / 4, "\(m) / 4 is not whole")
        #expect(m <= max(4, value * 2.5), "\(m) too loose for \(value)")
    }

    @Test("stacked areas: each layer's top is the running total, the tallest day touches the axis maximum's height or less")
    func stackedArea() {
        let f = Frame(width: 720, height: 260)
        let series = [Series(name: "a", color: "#000000", values: [10, 20, 30]), Series(name: "b", color: "#111111", values: [5, 0, 70])]
        let svg = Chart.stackedArea(f, categories: ["d1", "d2", "d3"], series: series, label: "t").markup
        Self.expectInside(svg, "stacked area")
        // Layer b's top at day 3 is 100 of an axis maximum of 100 (nice): the plot's top.
        #expect(svg.contains("\(HTML.number(f.x(2, of: 3))),\(HTML.number(f.top))"))
        // Layer a's top at day 1 is 10.
        #expect(svg.contains("\(HTML.number(f.x(0, of: 3))),\(HTML.number(f.y(10, maximum: 100)))"))
        #expect(svg.components(separatedBy: "<polygon").count - 1 == 2)
    }

    @Test("a single day is drawn as a band across the plot, not a zero-width sliver")
    func singleDay() {
        let f = Frame(width: 720, height: 260)
        let svg = Chart.stackedArea(f, categories: ["d1"], series: [Series(name: "a", color: "#000000", values: [7])], label: "t").markup
        Self.expectInside(svg, "single day")
        #expect(svg.contains("\(HTML.number(f.left)),") && svg.contains("\(HTML.number(f.left + f.plotWidth)),"))
    }

    @Test("bars, diverging bars, horizontal bars and the share line stay inside their viewBox, zeros and gaps included")
    func otherCharts() {
        let f = Frame(width: 720, height: 200)
        let days = (1...30).map { "d\($0)" }
        let values = (1...30).map { Double($0 % 7 == 0 ? 0 : $0 * 13) }
        Self.expectInside(Chart.stackedBars(f, categories: days, series: [Series(name: "a", color: "#000000", values: values)], label: "t").markup, "bars")
        Self.expectInside(Chart.divergingBars(f, categories: days, up: Series(name: "on", color: "#000000", values: values),
                                              down: Series(name: "off", color: "#111111", values: values.reversed()), label: "t").markup, "diverging")
        Self.expectInside(Chart.horizontalBars(labels: ["a", "b", "c"], series: [Series(name: "7", color: "#000000", values: [3, 0, 9]),
                                                                                Series(name: "30", color: "#111111", values: [9, 1, 30])],
                                               stacked: false, label: "t").markup, "horizontal")
        Self.expectInside(Chart.horizontalBars(labels: ["a"], series: [Series(name: "x", color: "#000000", values: [0])], stacked: true, label: "t").markup,
                          "horizontal zeros")
        Self.expectInside(Chart.shareLine(f, categories: ["0", "1", "2", "3"], shares: [0, nil, 0.5, 1], color: "#000000", label: "t").markup, "line")
        let zero = Chart.stackedBars(f, categories: ["d1"], series: [Series(name: "a", color: "#000000", values: [0])], label: "t").markup
        Self.expectInside(zero, "all zero")
    }

    @Test("a diverging bar's net diamond sits at on minus off")
    func netMarker() {
        let f = Frame(width: 720, height: 200)
        let svg = Chart.divergingBars(f, categories: ["d1"], up: Series(name: "on", color: "#000000", values: [2]),
                                      down: Series(name: "off", color: "#111111", values: [6]), label: "t").markup
        // extent = niceMaximum(6) = 8; zero line in the middle; net -4 is half way down.
        let zero = f.top + f.plotHeight / 2
        let netY = zero + (f.plotHeight / 2) * 4 / 8
        let band = f.band(0, of: 1)
        #expect(svg.contains("M\(HTML.number(band.x + band.width / 2)) \(HTML.number(netY - 5))"))
    }
}
