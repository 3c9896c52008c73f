import CBlueZ  // also the module that owns <sys/socket.h> declarations once BlueZ headers are in the build
#if canImport(Glibc)
import Glibc
#endif

/// Opens the transport a spec names. Blocking (connect, open) but brief: call it before the stack starts.
/// `heldAdapter` and `onAdapterTaken` concern only the HCI user channel (`HCIUserChannel.open`).
public func openHCITransport(_ spec: TransportSpec, heldAdapter: HeldAdapterPolicy = .refuse,
                             onAdapterTaken: (UInt16) -> Void = { _ in }) throws(HCITransportError) -> any HCITransport {
    switch spec {
    case .tcp(let host, let port):
        let descriptor = try connectTCP(host: host, port: port, spec: spec)
        return try FileDescriptorTransport(descriptor: descriptor, name: spec.description, isSocket: true)
    case .unix(let path):
        let descriptor = try connectUnix(path: path, spec: spec)
        return try FileDescriptorTransport(descriptor: descriptor, name: spec.description, isSocket: true)
    case .serial(let device, let baudRate):
        let descriptor = try SerialPortSettings(baudRate: baudRate).open(device: device, spec: spec)
        return try FileDescriptorTransport(descriptor: descriptor, name: spec.description, isSocket: false)
    case .hciUserChannel(let index):
        let descriptor = try HCIUserChannel.open(adapterIndex: index, heldAdapter: heldAdapter, onTaken: onAdapterTaken)
        return try FileDescriptorTransport(descriptor: descriptor, name: spec.description, isSocket: true, isDatagram: true)
    }
}

private func connectTCP(host: String, port: UInt16, spec: TransportSpec) throws(HCITransportError) -> Int32 {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var results: UnsafeMutablePointer<addrinfo>?
    let status = getaddrinfo(host, String(port), &hints, &results)
    guard status == 0, let first = results else {
        throw .openFailed(spec: spec.description, reason: "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
    }
    defer { freeaddrinfo(first) }
    var lastErrno: Int32 = 0
    var candidate: UnsafeMutablePointer<addrinfo>? = first
    while let info = candidate {
        candidate = info.pointee.ai_next
        let descriptor = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if descriptor < 0 { lastErrno = errno; continue }
        if connect(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
            // HCI packets are small and latency-bound: do not let Nagle hold them back.
            var enabled: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &enabled, socklen_t(MemoryLayout<Int32>.size))
            return descriptor
        }
        lastErrno = errno
        Glibc.close(descriptor)
    }
    throw .openFailed(spec: spec.description, reason: "connect failed: \(describeErrno(lastErrno))")
}

private func connectUnix(path: String, spec: TransportSpec) throws(HCITransportError) -> Int32 {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let pathBytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard pathBytes.count < capacity else {
        throw .openFailed(spec: spec.description, reason: "socket path longer than \(capacity - 1) bytes")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: pathBytes)
    }
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw .openFailed(spec: spec.description, reason: describeErrno(errno)) }
    let result = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard result == 0 else {
        let code = errno
        Glibc.close(descriptor)
        throw .openFailed(spec: spec.description, reason: "connect failed: \(describeErrno(code))")
    }
    return descriptor
}
