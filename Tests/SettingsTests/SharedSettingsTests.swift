import Foundation
import Settings
import Testing
import TestTiers

/// The pieces the node and the server share: each side's words must come out of the one type
/// exactly as each side worded them before (operators and docs quote them).
@Suite(.tags(.unit)) struct SharedSettingsTests {
    @Test func sourcesKeepTheNodesWords() throws {
        let file = SettingSource.file(path: "/etc/tracer.toml", line: 4)
        #expect(file.description == "/etc/tracer.toml:4")
        #expect(file.location == "/etc/tracer.toml line 4")
        #expect(file.remedy == "fix that line, or delete it to use the default")
        #expect(SettingSource.builtIn(detail: "$XDG_CACHE_HOME").description == "default ($XDG_CACHE_HOME)")
        #expect(SettingSource.builtIn(detail: nil).remedy == "set it explicitly")
        let encoded = try JSONEncoder().encode(file)
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(object["kind"] as? String == "file" && object["path"] as? String == "/etc/tracer.toml" && object["line"] as? Int == 4)
    }

    @Test func sourcesKeepTheServersWords() {
        let file = SettingSource.file(path: nil, line: nil)
        #expect(file.description == "file")
        #expect(file.location == "the configuration file")
        #expect(file.remedy == "fix the configuration file")
        #expect(SettingSource.builtIn(detail: nil).description == "default")
        let variable = SettingSource.environment(variable: "TRACER_SERVER_RETENTION_DAYS")
        #expect(variable.description == "env TRACER_SERVER_RETENTION_DAYS")
        #expect(variable.location == "TRACER_SERVER_RETENTION_DAYS")
        #expect(variable.remedy == "fix or unset TRACER_SERVER_RETENTION_DAYS")
        let flag = SettingSource.flag("--retention-days")
        #expect(flag.description == "flag --retention-days")
        #expect(flag.remedy == "fix the value given to --retention-days")
    }

    @Test func typedTextReadsAlikeOnBothSides() {
        #expect(SettingText.integer(" 1_000 ") == 1_000)
        #expect(SettingText.integer("ten") == nil)
        #expect(SettingText.number("2.5") == 2.5)
        #expect(SettingText.number("inf") == nil && SettingText.number("nan") == nil)
        #expect(SettingText.boolean(" Yes") == true && SettingText.boolean("off") == false && SettingText.boolean("maybe") == nil)
        #expect(SettingText.items(" 10.0.0.1, ,10.0.0.2 ") == ["10.0.0.1", "10.0.0.2"])
        #expect(SettingText.environmentValue("TRACER_X", in: ["TRACER_X": ""]) == nil)
        #expect(SettingText.environmentValue("TRACER_X", in: ["TRACER_X": "1"]) == "1")
    }

    @Test func flagArgumentsSplitTheirInlineValue() {
        let inline = SettingFlagArgument("--check-interval=120")
        #expect(inline?.name == "--check-interval" && inline?.inlineValue == "120")
        #expect(SettingFlagArgument("--url=http://h/?a=b")?.inlineValue == "http://h/?a=b")
        let switchFlag = SettingFlagArgument("--continuous-scan")
        #expect(switchFlag?.name == "--continuous-scan" && switchFlag?.inlineValue == nil)
        #expect(SettingFlagArgument("serve") == nil)
    }

    @Test func theConfigTableKeepsItsLayout() {
        let text = SettingsTable.text(fileLine: "Configuration file: c.json", rows: [["retentionDays", "14", "file"], ["a", "3000", "default"]])
        #expect(text == """
            Configuration file: c.json

            SETTING        VALUE  SOURCE
            retentionDays  14     file
            a              3000   default
            """)
    }
}
