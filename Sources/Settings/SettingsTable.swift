/// The text of `tracer config` and `tracer-server config`: the configuration file's line, then a
/// SETTING, VALUE, SOURCE table.
public enum SettingsTable {
    public static func text(fileLine: String, rows: [[String]]) -> String {
        fileLine + "\n\n" + TextTable.render(header: ["SETTING", "VALUE", "SOURCE"], rows: rows)
    }
}

/// Columns padded to their widest cell and two spaces apart; the last column is not padded.
public enum TextTable {
    public static func render(header: [String], rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
