import Foundation

/// ROC curves as a small self-contained SVG (no plotting package): one polyline per
/// configuration, its operating point as a dot, and the deployed app's own point as a cross.
struct ROCPicture {
    var curves: [(name: String, points: [(fpr: Double, tpr: Double)], operating: (fpr: Double, tpr: Double)?)]
    var app: (fpr: Double, tpr: Double)

    static let colours = ["#7f7f7f", "#1f77b4", "#ff7f0e", "#9467bd", "#2ca02c", "#d62728", "#8c564b", "#e377c2", "#17becf", "#000000"]

    var svg: String {
        let size = 420.0, left = 60.0, top = 20.0, legendWidth = 330.0
        func x(_ fpr: Double) -> String { format(left + fpr * size, 1) }
        func y(_ tpr: Double) -> String { format(top + (1 - tpr) * size, 1) }
        var lines: [String] = []
        lines.append(#"<svg xmlns="http://www.w3.org/2000/svg" width="\#(Int(left + size + legendWidth + 20))" height="\#(Int(top + size + 60))" font-family="sans-serif" font-size="12">"#)
        lines.append(#"<rect width="100%" height="100%" fill="white"/>"#)
        lines.append(#"<rect x="\#(x(0))" y="\#(y(1))" width="\#(size)" height="\#(size)" fill="none" stroke="black"/>"#)
        for tick in stride(from: 0.0, through: 1.0, by: 0.2) {
            lines.append(#"<line x1="\#(x(tick))" y1="\#(y(0))" x2="\#(x(tick))" y2="\#(y(1))" stroke="rgb(224,224,224)"/>"#)
            lines.append(#"<line x1="\#(x(0))" y1="\#(y(tick))" x2="\#(x(1))" y2="\#(y(tick))" stroke="rgb(224,224,224)"/>"#)
            lines.append(#"<text x="\#(x(tick))" y="\#(format(top + size + 16, 1))" text-anchor="middle">\#(format(tick, 1))</text>"#)
            lines.append(#"<text x="\#(format(left - 6, 1))" y="\#(format(top + (1 - tick) * size + 4, 1))" text-anchor="end">\#(format(tick, 1))</text>"#)
        }
        lines.append(#"<line x1="\#(x(0))" y1="\#(y(0))" x2="\#(x(1))" y2="\#(y(1))" stroke="rgb(187,187,187)" stroke-dasharray="4 4"/>"#)
        lines.append(#"<text x="\#(format(left + size / 2, 1))" y="\#(format(top + size + 36, 1))" text-anchor="middle">false-positive rate</text>"#)
        lines.append(#"<text transform="translate(16 \#(format(top + size / 2, 1))) rotate(-90)" text-anchor="middle">true-positive rate (6 ft, 15 min)</text>"#)
        for (index, curve) in curves.enumerated() {
            let colour = Self.colours[index % Self.colours.count]
            let path = curve.points.map { "\(x($0.fpr)),\(y($0.tpr))" }.joined(separator: " ")
            let width = index == curves.count - 1 ? 2.5 : 1.2
            lines.append(#"<polyline points="\#(path)" fill="none" stroke="\#(colour)" stroke-width="\#(width)"/>"#)
            if let point = curve.operating {
                lines.append(#"<circle cx="\#(x(point.fpr))" cy="\#(y(point.tpr))" r="4" fill="\#(colour)"/>"#)
            }
            let legendY = top + 14 + Double(index) * 18
            lines.append(#"<line x1="\#(format(left + size + 20, 1))" y1="\#(format(legendY - 4, 1))" x2="\#(format(left + size + 40, 1))" y2="\#(format(legendY - 4, 1))" stroke="\#(colour)" stroke-width="\#(width)"/>"#)
            lines.append(#"<text x="\#(format(left + size + 46, 1))" y="\#(format(legendY, 1))">\#(curve.name)</text>"#)
        }
        let crossX = left + app.fpr * size, crossY = top + (1 - app.tpr) * size
        lines.append(#"<path d="M\#(format(crossX - 5, 1)) \#(format(crossY - 5, 1)) L\#(format(crossX + 5, 1)) \#(format(crossY + 5, 1)) M\#(format(crossX - 5, 1)) \#(format(crossY + 5, 1)) L\#(format(crossX + 5, 1)) \#(format(crossY - 5, 1))" stroke="black" stroke-width="2"/>"#)
        let legendY = top + 14 + Double(curves.count) * 18
        lines.append(#"<text x="\#(format(left + size + 20, 1))" y="\#(format(legendY, 1))">× deployed app's own "high" (its 221 sessions)</text>"#)
        lines.append(#"<text x="\#(format(left + size + 20, 1))" y="\#(format(legendY + 18, 1))">● each configuration's operating point</text>"#)
        lines.append("</svg>")
        return lines.joined(separator: "\n") + "\n"
    }
}
