import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Which address a request's failed credential attempts count against when the server runs
/// behind reverse proxies (`trustForwardedFor`).
///
/// `X-Forwarded-For` is a list each proxy appends to, or replaces with the address it got the
/// request from (as deploy/nginx/tracer-server.conf does). Whatever the client sent itself comes
/// first, so only entries at the right end were written by proxies the operator runs: with
/// `trustedHops` proxies in a chain, the one nearest the server wrote the right-most entry, and
/// the client's address as the outermost proxy saw it is the `trustedHops`-th from the right.
/// Entries further left are the client's own words and never used; several header lines count
/// as one list, in order.
///
/// The header is believed only from a peer in `trustedProxies`: a client that reaches the server
/// past the proxy could otherwise name a new address with each request and never meet the limit.
package struct ForwardedFor: Sendable {
    private let trustedProxies: Set<String>
    private let trustedHops: Int

    package init(trustedProxies: [String], trustedHops: Int) {
        self.trustedProxies = Set(trustedProxies.compactMap(Self.canonicalAddress))
        self.trustedHops = trustedHops
    }

    /// The client's address per `headerValues` (the `X-Forwarded-For` lines), or nil when
    /// they are not to be believed (not from a trusted proxy, fewer entries than proxies, an
    /// empty entry): then the peer's own address counts.
    package func clientAddress(peer: String, headerValues: [String]) -> String? {
        guard let peer = Self.canonicalAddress(peer), trustedProxies.contains(peer) else { return nil }
        // Empty entries are kept so that a client cannot shift the positions counted from the right.
        let entries = headerValues.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
        guard entries.count >= trustedHops else { return nil }
        let entry = entries[entries.count - trustedHops].trimmingCharacters(in: .whitespaces)
        return entry.isEmpty ? nil : entry
    }

    /// An IP address in one spelling (IPv4-mapped IPv6 as plain IPv4, IPv6 compressed, lower
    /// case), or nil when `text` is not an IP address.
    package static func canonicalAddress(_ text: String) -> String? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: v4) { format(AF_INET, $0, length: INET_ADDRSTRLEN) } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        return withUnsafeBytes(of: v6) { format(AF_INET6, $0, length: INET6_ADDRSTRLEN) }
    }

    private static func format(_ family: Int32, _ address: UnsafeRawBufferPointer, length: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(length))
        guard inet_ntop(family, address.baseAddress, &buffer, socklen_t(length)) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
