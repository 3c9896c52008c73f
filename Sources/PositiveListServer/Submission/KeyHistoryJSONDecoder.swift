import Foundation

/// One daily key of an uploaded key history as JSON carries it.
public struct SubmittedKey: Codable, Sendable, Equatable {
    /// The UTC day, numbered from 1970-01-01 = 0: the number the node's store and the
    /// published key batch use, so no calendar is involved anywhere.
    public var day: Int64
    public var intervalSeconds: Int64
    /// 32 hexadecimal characters.
    public var key: String

    public init(day: Int64, intervalSeconds: Int64, key: String) {
        self.day = day
        self.intervalSeconds = intervalSeconds
        self.key = key
    }
}

/// The body of `POST /v1/key-histories`: `{"keys": [{"day": N, "intervalSeconds": N, "key": "…"}]}`.
public struct SubmittedKeyHistory: Codable, Sendable, Equatable {
    public var keys: [SubmittedKey]

    public init(keys: [SubmittedKey]) {
        self.keys = keys
    }

    /// Decodes with ``HistoryJSONDecoder``, by the same rules as an id history: unknown members
    /// skipped, repeated or missing fields refused, numbers that must denote integers exactly.
    public init(json: Data) throws(HistoryDecodingError) {
        self = try HistoryJSONDecoder.decode(json) { (decoder: inout HistoryJSONDecoder) throws(HistoryDecodingError) in
            try decoder.decodeKeyHistory()
        }
    }
}

extension HistoryJSONDecoder {
    mutating func decodeKeyHistory() throws(HistoryDecodingError) -> SubmittedKeyHistory {
        SubmittedKeyHistory(keys: try decodeObject(requiring: "keys", notAnObject: .notAKeyHistoryObject) {
            (decoder: inout HistoryJSONDecoder) throws(HistoryDecodingError) in try decoder.readKeys()
        })
    }

    private mutating func readKeys() throws(HistoryDecodingError) -> [SubmittedKey] {
        try readArrayOfObjects(named: "keys") {
            (decoder: inout HistoryJSONDecoder, index: Int) throws(HistoryDecodingError) in try decoder.readKey(index: index)
        }
    }

    private mutating func readKey(index: Int) throws(HistoryDecodingError) -> SubmittedKey {
        var day: Int64?
        var interval: Int64?
        var key: String?
        try readObject(depth: 3) { (decoder: inout HistoryJSONDecoder, name: String) throws(HistoryDecodingError) in
            switch name {
            case "day": try decoder.readOnce(integer: &day, path: { "keys[\(index)].day" })
            case "intervalSeconds": try decoder.readOnce(integer: &interval, path: { "keys[\(index)].intervalSeconds" })
            case "key": try decoder.readOnce(string: &key, path: { "keys[\(index)].key" })
            default: try decoder.skipValue(depth: 4)
            }
        }
        guard let day else { throw .missingField(path: "keys[\(index)].day") }
        guard let interval else { throw .missingField(path: "keys[\(index)].intervalSeconds") }
        guard let key else { throw .missingField(path: "keys[\(index)].key") }
        return SubmittedKey(day: day, intervalSeconds: interval, key: key)
    }
}
