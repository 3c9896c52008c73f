import Testing
import TestTiers
@testable import BLEHost
#if canImport(Glibc)
import Glibc
#endif

@Suite(.tags(.unit)) struct TransportSpecTests {
    @Test(arguments: [
        ("tcp:127.0.0.1:9001", TransportSpec.tcp(host: "127.0.0.1", port: 9001)),
        ("tcp:localhost:1", .tcp(host: "localhost", port: 1)),
        ("tcp:[::1]:9001", .tcp(host: "::1", port: 9001)),
        ("unix:/tmp/controller.sock", .unix(path: "/tmp/controller.sock")),
        ("serial:/dev/ttyUSB0", .serial(device: "/dev/ttyUSB0", baudRate: 1_000_000)),
        ("serial:/dev/ttyACM0,115200", .serial(device: "/dev/ttyACM0", baudRate: 115_200)),
        ("hci0", .hciUserChannel(index: 0)),
        ("hci12", .hciUserChannel(index: 12)),
        ("hci:3", .hciUserChannel(index: 3)),
        (" tcp:127.0.0.1:80 ", .tcp(host: "127.0.0.1", port: 80)),
    ])
    func parsesAcceptedForms(text: String, expected: TransportSpec) throws {
        #expect(try TransportSpec(parsing: text) == expected)
    }

    @Test func descriptionRoundTrips() throws {
        for text in ["tcp:127.0.0.1:9001", "tcp:[::1]:9001", "unix:/tmp/x", "serial:/dev/ttyUSB0,115200", "hci1"] {
            #expect(try TransportSpec(parsing: text).description == text)
        }
    }

    @Test(arguments: [
        "", "tcp:", "tcp:host", "tcp:host:", "tcp::9001", "tcp:host:0", "tcp:host:70000", "tcp:host:x",
        "unix:", "serial:", "serial:/dev/ttyS0,", "serial:/dev/ttyS0,fast", "serial:/dev/ttyS0,12345",
        "hci", "hcix", "hci:", "hci:-1", "usb:0", "bluetooth",
    ])
    func rejectsMalformedSpecsWithTheAcceptedForms(text: String) {
        do {
            _ = try TransportSpec(parsing: text)
            Issue.record("\"\(text)\" was accepted")
        } catch {
            #expect(error.spec == text)
            #expect(error.description.contains("tcp:HOST:PORT, unix:PATH, serial:DEVICE[,BAUD], hciN or hci:N"))
        }
    }

    @Test func userChannelFailuresExplainTheFix() {
        let busy = HCIUserChannel.explainFailure(errno: EBUSY, adapterIndex: 1, step: "bind")
        #expect(busy.contains("sudo btmgmt --index 1 power off"))
        #expect(busy.contains("sudo hciconfig hci1 down"))
        #expect(busy.contains("bluetoothd"))
        #expect(busy.contains("--take-adapter") && busy.contains("node.take_adapter = true"))
        let denied = HCIUserChannel.explainFailure(errno: EPERM, adapterIndex: 0, step: "bind")
        #expect(denied.contains("needs CAP_NET_ADMIN: run as root or through the systemd unit"))
        #expect(HCIUserChannel.explainFailure(errno: EAFNOSUPPORT, adapterIndex: 0, step: "socket").contains("no Bluetooth support"))
        #expect(HCIUserChannel.explainFailure(errno: EAFNOSUPPORT, adapterIndex: 0, step: "socket").contains("RestrictAddressFamilies="))
        #expect(HCIUserChannel.explainFailure(errno: ENODEV, adapterIndex: 4, step: "bind").contains("no adapter hci4"))
    }

    @Test func openingUserChannelHereFailsWithExplanation() async {
        // This machine has no kernel Bluetooth; real adapters report EBUSY/EPERM instead, covered above.
        do {
            let transport = try openHCITransport(.hciUserChannel(index: 0))
            await transport.close()
        } catch {
            guard case .openFailed(let spec, let reason) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(spec == "hci0")
            #expect(!reason.isEmpty)
        }
    }

    @Test func tcpConnectFailureIsTyped() {
        // Port 1 on loopback is closed on this machine.
        #expect(throws: HCITransportError.self) { try openHCITransport(.tcp(host: "127.0.0.1", port: 1)) }
    }
}
