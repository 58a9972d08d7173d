import Foundation

/// The one-line progress display on a terminal: bytes, percent when the total is known,
/// rate, and time left. Redrawn at most ten times a second, on standard error.
struct ProgressLine {
    private let started = ContinuousClock.now
    private var lastDraw: ContinuousClock.Instant?
    private var drewSomething = false

    /// Redraws the line; `finished` draws the final form (elapsed time instead of time left).
    mutating func update(bytes: Int64, total: Int64?, finished: Bool = false) {
        let now = ContinuousClock.now
        if !finished, let lastDraw, now - lastDraw < .milliseconds(100) { return }
        lastDraw = now
        let components = (now - started).components
        let elapsed = Double(components.seconds) + Double(components.attoseconds) / 1e18
        let rate = elapsed > 0 ? Double(bytes) / elapsed : 0
        var line = "  " + Self.size(bytes)
        if let total, total > 0 {
            let percent = min(100, Int(Double(bytes) * 100 / Double(total)))
            line += " / \(Self.size(total))  \(percent)%"
        }
        line += "  \(Self.size(Int64(rate)))/s"
        if finished {
            line += elapsed < 60 ? String(format: "  in %.1f s", elapsed) : "  in \(Self.duration(elapsed))"
        } else if let total, rate > 0, total >= bytes {
            line += "  \(Self.duration(Double(total - bytes) / rate)) left"
        }
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
        drewSomething = true
    }

    func finish() {
        if drewSomething { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    static func size(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "--:--" }
        let total = Int(seconds.rounded())
        if total >= 3600 { return String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60) }
        return String(format: "%d:%02d", total / 60, total % 60)
    }
}
