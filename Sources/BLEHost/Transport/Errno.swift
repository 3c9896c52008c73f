#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// "ECONNREFUSED (111): Connection refused", for error messages a person reads.
func describeErrno(_ code: Int32) -> String {
    let message = String(cString: strerror(code))
    return "\(errnoName(code)) (\(code)): \(message)"
}

private func errnoName(_ code: Int32) -> String {
    switch code {
    case EPERM: "EPERM"
    case ENOENT: "ENOENT"
    case EINTR: "EINTR"
    case EIO: "EIO"
    case EBADF: "EBADF"
    case EAGAIN: "EAGAIN"
    case EACCES: "EACCES"
    case EBUSY: "EBUSY"
    case ENODEV: "ENODEV"
    case EINVAL: "EINVAL"
    case EPIPE: "EPIPE"
    case EAFNOSUPPORT: "EAFNOSUPPORT"
    case EADDRINUSE: "EADDRINUSE"
    case ENETDOWN: "ENETDOWN"
    case ECONNRESET: "ECONNRESET"
    case ECONNREFUSED: "ECONNREFUSED"
    case ETIMEDOUT: "ETIMEDOUT"
    case EHOSTUNREACH: "EHOSTUNREACH"
    case ERFKILL: "ERFKILL"
    default: "errno"
    }
}
