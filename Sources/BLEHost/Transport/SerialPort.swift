#if canImport(Glibc)
import Glibc
#endif

/// Raw 8N1 serial settings with RTS/CTS hardware flow control, as HCI UART controllers expect.
struct SerialPortSettings {
    var baudRate: Int

    static let supportedBaudRates = [9600, 19200, 38400, 57600, 115_200, 230_400, 460_800, 921_600, 1_000_000, 2_000_000, 3_000_000]

    static func speedConstant(for baudRate: Int) -> speed_t? {
        switch baudRate {
        case 9600: speed_t(B9600)
        case 19200: speed_t(B19200)
        case 38400: speed_t(B38400)
        case 57600: speed_t(B57600)
        case 115_200: speed_t(B115200)
        case 230_400: speed_t(B230400)
        case 460_800: speed_t(B460800)
        case 921_600: speed_t(B921600)
        case 1_000_000: speed_t(B1000000)
        case 2_000_000: speed_t(B2000000)
        case 3_000_000: speed_t(B3000000)
        default: nil
        }
    }

    func open(device: String, spec: TransportSpec) throws(HCITransportError) -> Int32 {
        guard let speed = Self.speedConstant(for: baudRate) else {
            throw .openFailed(spec: spec.description, reason: "unsupported baud rate \(baudRate)")
        }
        let descriptor = Glibc.open(device, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw .openFailed(spec: spec.description, reason: "cannot open \(device): \(describeErrno(errno))")
        }
        var settings = termios()
        guard tcgetattr(descriptor, &settings) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw .openFailed(spec: spec.description, reason: "\(device) is not a terminal: \(describeErrno(code))")
        }
        cfmakeraw(&settings)
        cfsetispeed(&settings, speed)
        cfsetospeed(&settings, speed)
        settings.c_cflag |= tcflag_t(CRTSCTS) | tcflag_t(CLOCAL) | tcflag_t(CREAD)
        withUnsafeMutableBytes(of: &settings.c_cc) { controlCharacters in
            controlCharacters[Int(VMIN)] = 1
            controlCharacters[Int(VTIME)] = 0
        }
        guard tcsetattr(descriptor, TCSANOW, &settings) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw .openFailed(spec: spec.description, reason: "cannot configure \(device): \(describeErrno(code))")
        }
        tcflush(descriptor, TCIOFLUSH)
        return descriptor
    }
}
