import Foundation
@testable import PositiveListServer
@testable import ServerHTTPAPI
import Testing
import TestTiers

@Suite(.tags(.unit)) struct ConnectionConfigurationTests {
    func parse(_ extra: String = "") throws(ConfigurationError) -> ServerConfiguration {
        try ServerConfiguration.parseWithOneAuthority(extra)
    }

    @Test func proxyAndTimeoutDefaultsSuitOneNginxOnTheSameHost() throws {
        let configuration = try parse()
        #expect(configuration.idleTimeoutSeconds == 30)
        #expect(configuration.requestReadTimeoutSeconds == 60)
        #expect(configuration.trustForwardedFor == false)
        #expect(configuration.trustedProxies == ["127.0.0.1", "::1"])
        #expect(configuration.trustedProxyHops == 1)
    }

    @Test func proxyAndTimeoutSettingsAreReadAndChecked() throws {
        let configuration = try parse(#""idleTimeoutSeconds": 5, "requestReadTimeoutSeconds": 300, "trustForwardedFor": true, "trustedProxies": ["10.0.0.2", "fd00::2"], "trustedProxyHops": 2"#)
        #expect(configuration.idleTimeoutSeconds == 5)
        #expect(configuration.requestReadTimeoutSeconds == 300)
        #expect(configuration.trustedProxies == ["10.0.0.2", "fd00::2"])
        #expect(configuration.trustedProxyHops == 2)
        for bad in [
            #""idleTimeoutSeconds": 0"#, #""idleTimeoutSeconds": 3601"#, #""requestReadTimeoutSeconds": 0"#, #""trustedProxies": ["nginx.local"]"#,
            #""trustedProxies": ["10.0.0.0/8"]"#, #""trustForwardedFor": true, "trustedProxies": []"#, #""trustedProxyHops": 0"#,
        ] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try parse(bad) }
        }
    }
}

@Suite(.tags(.unit)) struct ForwardedForTests {
    @Test func theClientIsTheEntryTheTrustedProxiesWroteAndOnlyFromThem() {
        let one = ForwardedFor(trustedProxies: ["127.0.0.1", "::1"], trustedHops: 1)
        #expect(one.clientAddress(peer: "127.0.0.1", headerValues: ["203.0.113.7"]) == "203.0.113.7")
        #expect(one.clientAddress(peer: "::1", headerValues: ["6.6.6.6, 203.0.113.7"]) == "203.0.113.7")
        #expect(one.clientAddress(peer: "::ffff:127.0.0.1", headerValues: ["6.6.6.6", " 203.0.113.7 "]) == "203.0.113.7")
        #expect(one.clientAddress(peer: "192.0.2.1", headerValues: ["203.0.113.7"]) == nil)
        #expect(one.clientAddress(peer: "127.0.0.1", headerValues: []) == nil)
        #expect(one.clientAddress(peer: "127.0.0.1", headerValues: ["203.0.113.7,"]) == nil)
        let two = ForwardedFor(trustedProxies: ["10.0.0.2"], trustedHops: 2)
        #expect(two.clientAddress(peer: "10.0.0.2", headerValues: ["6.6.6.6, 203.0.113.7, 198.51.100.1"]) == "203.0.113.7")
        #expect(two.clientAddress(peer: "10.0.0.2", headerValues: ["198.51.100.1"]) == nil)
    }

    @Test func addressesHaveOneSpelling() {
        #expect(ForwardedFor.canonicalAddress("::FFFF:127.0.0.1") == "127.0.0.1")
        #expect(ForwardedFor.canonicalAddress("FD00:0::2") == "fd00::2")
        #expect(ForwardedFor.canonicalAddress("127.0.0.1") == "127.0.0.1")
        #expect(ForwardedFor.canonicalAddress("localhost") == nil)
        #expect(ForwardedFor.canonicalAddress("") == nil)
    }
}

@Suite(.tags(.unit)) struct MediaTypeTests {
    @Test func mediaTypesAreParsedAsRFC9110Says() {
        #expect(MediaType("application/json")?.isJSON == true)
        #expect(MediaType("application/json;charset=utf-8")?.isJSON == true)
        #expect(MediaType("APPLICATION/Json ;\tCHARSET=\"utf-8\" ; q=1")?.isJSON == true)
        #expect(MediaType("application/json;")?.isJSON == true)
        #expect(MediaType(#"application/json; note="a \"quoted\" value""#)?.parameters["note"] == #"a "quoted" value"#)
        for notJSON in ["application/jsonx", "application/json-seq", "application/json+ld", "text/json", "application/json; charset=utf-16"] {
            #expect(MediaType(notJSON)?.isJSON != true, "\(notJSON)")
        }
        for malformed in ["", "application", "application/", "/json", "application/json, text/plain", "application/json; charset",
                          "application/json; charset=", #"application/json; a="open"#, "application/json; a=1; A=2", "appli cation/json"] {
            #expect(MediaType(malformed) == nil, "\(malformed)")
        }
    }
}
