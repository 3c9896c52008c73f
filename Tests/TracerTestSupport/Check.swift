import Foundation
import Testing

/// Small checks shared by the test targets; a target adds its own in an extension.
public enum Check {
    public static func json(_ text: String) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8))
        return try #require(object as? [String: Any], "expected a JSON object, got: \(text.prefix(300))")
    }
}
