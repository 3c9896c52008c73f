import Foundation
import TracerTestSupport

/// What the server's metrics listener answers to `GET /metrics`: Prometheus's text format, read
/// into samples.
package struct Exposition {
    package struct Sample {
        package var name: String
        package var labels: [String: String]
        package var value: Double
    }

    package let text: String
    package let samples: [Sample]

    package init(_ text: String) {
        self.text = text
        samples = text.split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { return nil }
            let series = line[..<space]
            let name = String(series.prefix { $0 != "{" })
            var labels: [String: String] = [:]
            for match in series.matches(of: #/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/#) { labels[String(match.1)] = String(match.2) }
            return Sample(name: name, labels: labels, value: value)
        }
    }

    /// The value of the one sample named `name` with exactly `labels`, or nil.
    package func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    /// `GET /metrics` on the metrics listener at 127.0.0.1:`port`; throws unless it answers 200 in
    /// Prometheus's text format.
    package static func scrape(port: Int) async throws -> Exposition {
        let connection = try RawConnection(port: port)
        connection.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let response = try await connection.receiveResponse()
        guard response.status == 200 else { throw HarnessFailure(description: "GET /metrics answered \(response.status): \(response.text)") }
        guard response.header("content-type")?.hasPrefix("text/plain; version=0.0.4") == true else {
            throw HarnessFailure(description: "GET /metrics is not Prometheus's text format: \(response.head)")
        }
        return Exposition(response.body)
    }
}
