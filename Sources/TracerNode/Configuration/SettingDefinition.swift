import Settings

/// One of the node's settings: a row of the settings kit over `NodeSettings`.
typealias SettingDefinition = SettingRow<NodeSettings>
typealias NodeSettingConstraint = SettingConstraint<NodeSettings>

extension TOMLValue {
    /// The value as the settings kit checks it.
    var settingInput: SettingInput {
        switch self {
        case .string(let text): .text(text)
        case .integer(let integer): .integer(integer)
        case .float(let number): .number(number)
        case .boolean(let boolean): .boolean(boolean)
        }
    }
}
