/// Where the controller is, written the same way on every command line and config file:
/// `tcp:HOST:PORT`, `unix:PATH`, `serial:DEVICE[,BAUD]`, `hci0` or `hci:N`.
public enum TransportSpec: Equatable, Sendable, CustomStringConvertible {
    case tcp(host: String, port: UInt16)
    case unix(path: String)
    case serial(device: String, baudRate: Int)
    /// The Linux HCI user channel of adapter hciN: exclusive raw access, bypassing bluetoothd.
    case hciUserChannel(index: UInt16)

    public static let defaultSerialBaudRate = 1_000_000
    public static let acceptedForms = "tcp:HOST:PORT, unix:PATH, serial:DEVICE[,BAUD], hciN or hci:N"

    public init(parsing text: String) throws(TransportSpecError) {
        let trimmed = text.trimmingWhitespace()
        func invalid(_ why: String) -> TransportSpecError { TransportSpecError(spec: text, problem: why) }

        if let rest = trimmed.dropPrefix("tcp:") {
            // The port follows the last colon so that an IPv6 literal such as [::1] keeps its colons.
            guard let colon = rest.lastIndex(of: ":") else { throw invalid("missing :PORT") }
            var host = String(rest[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { throw invalid("missing HOST") }
            let portText = rest[rest.index(after: colon)...]
            guard let port = UInt16(portText), port > 0 else { throw invalid("PORT must be 1-65535, got \"\(portText)\"") }
            self = .tcp(host: host, port: port)
        } else if let rest = trimmed.dropPrefix("unix:") {
            guard !rest.isEmpty else { throw invalid("missing PATH") }
            self = .unix(path: String(rest))
        } else if let rest = trimmed.dropPrefix("serial:") {
            let parts = rest.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false)
            guard let device = parts.first, !device.isEmpty else { throw invalid("missing DEVICE") }
            var baudRate = Self.defaultSerialBaudRate
            if parts.count == 2 {
                guard let parsed = Int(parts[1]), parsed > 0 else { throw invalid("BAUD must be a positive number, got \"\(parts[1])\"") }
                guard SerialPortSettings.speedConstant(for: parsed) != nil else {
                    throw invalid("unsupported BAUD \(parsed) (supported: \(SerialPortSettings.supportedBaudRates.map(String.init).joined(separator: ", ")))")
                }
                baudRate = parsed
            }
            self = .serial(device: String(device), baudRate: baudRate)
        } else if let rest = trimmed.dropPrefix("hci:") {
            guard let index = UInt16(rest), index < 0xFFFF else { throw invalid("N must be an adapter number, got \"\(rest)\"") }
            self = .hciUserChannel(index: index)
        } else if let rest = trimmed.dropPrefix("hci"), !rest.isEmpty {
            guard let index = UInt16(rest), index < 0xFFFF else { throw invalid("expected hciN with N an adapter number") }
            self = .hciUserChannel(index: index)
        } else {
            throw invalid("unknown transport kind")
        }
    }

    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "tcp:[\(host)]:\(port)" : "tcp:\(host):\(port)"
        case .unix(let path): "unix:\(path)"
        case .serial(let device, let baudRate): "serial:\(device),\(baudRate)"
        case .hciUserChannel(let index): "hci\(index)"
        }
    }
}

/// A transport spec string that does not have one of the accepted forms.
public struct TransportSpecError: Error, Equatable, Sendable, CustomStringConvertible {
    public let spec: String
    public let problem: String

    public var description: String {
        "invalid transport \"\(spec)\": \(problem); expected one of \(TransportSpec.acceptedForms)"
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }

    fileprivate func dropPrefix(_ prefix: String) -> Substring? {
        hasPrefix(prefix) ? dropFirst(prefix.count) : nil
    }
}
