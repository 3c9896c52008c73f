import Foundation

/// A setting that is an object of fields (the server's `database`, `console`…): each field a row
/// over the section's own type, with its kind, bounds and refusals in the kit's words
/// ("console.sessionIdleSeconds must be between 1 and 86400, got 0"). What concerns several
/// fields at once (one required, one bounded by another) is the owner's `finish`.
public struct SettingSection<Value: Sendable>: Sendable {
    /// Keyed by the field's name in the object.
    public var fields: [SettingRow<Value>]

    public init(_ fields: [SettingRow<Value>]) {
        self.fields = fields
    }

    public var names: Set<String> { Set(fields.map(\.key)) }

    /// "an object: authority, enabled, listen".
    public var describe: String { "an object: " + fields.map(\.key).sorted().joined(separator: ", ") }

    /// `start` with each field the object gives checked and stored, in the rows' order. Fields the
    /// section does not know are the caller's to refuse first (they are not read).
    public func read(_ input: SettingInput, into start: Value, paths: PathContext) throws(SettingProblem) -> Value {
        guard case .object(let given) = input else { throw SettingProblem("must be \(describe), got \(input.typeName)") }
        var value = start
        for field in fields {
            guard let input = given[field.key] else { continue }
            do {
                try field.assign(&value, try field.kind.check(input, paths: paths).get())
            } catch {
                throw error.namesItsSetting ? error : SettingProblem(error.text, field: field.key + (error.field ?? ""))
            }
        }
        return value
    }
}

extension SettingRow {
    /// A field of a section given only in the file: a text converted (and perhaps refused) by
    /// `store`, whose refusal follows the field's name.
    public static func field(
        _ key: String, _ kind: SettingKind, help: String = "",
        store: @escaping @Sendable (inout Target, SettingValue) throws(SettingProblem) -> Void
    ) -> SettingRow {
        SettingRow(key: key, kind: kind, environmentVariable: nil, flag: nil, help: help, assign: store)
    }
}
