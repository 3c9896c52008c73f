import Foundation
@testable import PositiveListServer
import Testing

@Suite struct MediaTypeTests {
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
