import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PositiveListServer
import TransparencyLog

/// `POST /v1/add-checkpoint`, C2SP tlog-witness's one call, routed only when the server witnesses
/// logs (`witnessedLogs`). Under `/v1` as the rest of the API, so the reverse proxy of deploy/nginx
/// reaches it without a new location: the witness's submission prefix is `https://HOST/v1`.
///
/// It answers as tlog-witness says, not with the API's JSON errors: 200 with the cosignature
/// line, 409 with `Content-Type: text/x.tlog.size` and the size it holds, and every refusal with
/// its status and one plain-text sentence, which any tlog-witness client reads.
package struct WitnessAPI: Sendable {
    static let path = "v1/add-checkpoint"
    let witness: CheckpointWitness

    package init(witness: CheckpointWitness) {
        self.witness = witness
    }

    package func addRoutes(to router: Router<PositiveListRequestContext>, table: inout RouteTable) {
        table.add(RouterPath(Self.path), .post, to: router) { request, _ in try await addCheckpoint(request) }
    }

    private func addCheckpoint(_ request: Request) async throws -> Response {
        let limit = AddCheckpointRequest.maximumBytes
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            return Self.text(.contentTooLarge, "The request body is larger than \(limit) bytes, more than an add-checkpoint request can need.")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limit)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            return Self.text(.contentTooLarge, "The request body is larger than \(limit) bytes, more than an add-checkpoint request can need.")
        }
        let answer = Self.answer(await witness.addCheckpoint(Array(body.readableBytesView)))
        var headers: HTTPFields = [:]
        headers[.contentType] = answer.contentType
        return Response(
            status: HTTPResponse.Status(code: answer.status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body)))
    }

    /// The answer tlog-witness gives each outcome: 200 and the cosignature line; 409 with the
    /// held size as `text/x.tlog.size`; any other refusal its status and one sentence.
    static func answer(_ outcome: WitnessOutcome) -> WitnessHTTPAnswer {
        switch outcome {
        case .cosigned(let lines, _):
            return WitnessHTTPAnswer(status: 200, contentType: plainText, body: Array(lines.utf8))
        case .refused(.oldSizeMismatch(_, let heldSize)):
            return WitnessHTTPAnswer(status: 409, contentType: WitnessAnswer.sizeContentType, body: Array(WitnessAnswer.sizeBody(heldSize).utf8))
        case .refused(let refusal):
            return WitnessHTTPAnswer(status: refusal.httpStatus, contentType: plainText, body: Array((capitalized(refusal.description) + ".\n").utf8))
        case .failed(let reason):
            return WitnessHTTPAnswer(status: 500, contentType: plainText, body: Array((reason + "\n").utf8))
        }
    }

    static let plainText = "text/plain; charset=utf-8"

    /// A plain-text answer of one sentence.
    private static func text(_ status: HTTPResponse.Status, _ sentence: String) -> Response {
        Response(status: status, headers: [.contentType: plainText], body: ResponseBody(byteBuffer: ByteBuffer(string: sentence + "\n")))
    }

    private static func capitalized(_ text: String) -> String {
        text.prefix(1).uppercased() + text.dropFirst()
    }
}
