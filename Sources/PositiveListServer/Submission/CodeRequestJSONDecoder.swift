import Foundation

/// The optional body of `POST /v1/codes`: `{"expiresInSeconds": N}` or `{}`.
///
/// Stricter than the histories: docs/openapi.yaml declares `additionalProperties: false`, and an
/// authority's script that misspells the member (`expiresIn`) must hear so rather than get a
/// code with the default lifetime. A repeated member is refused as everywhere (which one would
/// count is ambiguous).
package struct CodeRequest: Sendable, Equatable {
    package var expiresInSeconds: Int64?

    init(expiresInSeconds: Int64? = nil) {
        self.expiresInSeconds = expiresInSeconds
    }

    package init(json: Data) throws(HistoryDecodingError) {
        self = try HistoryJSONDecoder.decode(json) { (decoder: inout HistoryJSONDecoder) throws(HistoryDecodingError) in
            try decoder.decodeCodeRequest()
        }
    }
}

extension HistoryJSONDecoder {
    mutating func decodeCodeRequest() throws(HistoryDecodingError) -> CodeRequest {
        var request = CodeRequest()
        var seen = false
        try decodeTopLevelObject(notAnObject: .notACodeRequestObject) { (decoder: inout HistoryJSONDecoder, name: String) throws(HistoryDecodingError) in
            guard name == "expiresInSeconds" else { throw .unknownField(name: name) }
            guard !seen else { throw .duplicateField(path: name) }
            seen = true
            request.expiresInSeconds = try decoder.readInteger(path: { "expiresInSeconds" })
        }
        return request
    }
}
