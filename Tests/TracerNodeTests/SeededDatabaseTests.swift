import Foundation
import IDRotation
import Testing
import TestTiers
#if canImport(Glibc)
import Glibc
import TracerCore
import TracerTestSupport
#endif

/// A database filled by `TracerSimulator seed`, in its own scratch directory.
struct SeededDatabase {
    let scratch: Scratch
    let path: String

    init(seed: Int = 7) throws {
        scratch = try Scratch()
        path = scratch.file("node.db")
        do {
            try Products.seed(path, home: scratch.path, days: 3, peersPerDay: 60, interval: 900, seed: seed)
        } catch {
            scratch.remove()
            throw error
        }
    }

    func remove() { scratch.remove() }

    func tracer(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        try Products.tracer(arguments + ["--db", path], home: scratch.path, environment: environment)
    }

    /// `tracer` that must succeed.
    func succeeding(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessResult {
        let result = try tracer(arguments)
        try #require(result.exitCode == 0 && !result.signaled, "\(arguments): \(result)", sourceLocation: sourceLocation)
        return result
    }

    /// The full ids in `tracer export`: (own ids, peer ids).
    func exportedHexIDs() throws -> (own: Set<String>, peers: Set<String>) {
        let export = try Check.json(succeeding(["export"]).stdout)
        let own = try #require(export["ownIDs"] as? [[String: Any]])
        let encounters = try #require(export["encounters"] as? [[String: Any]])
        return (Set(own.compactMap { $0["id"] as? String }), Set(encounters.compactMap { $0["peerID"] as? String }))
    }
}

extension TracerNodeTests {
    @Suite(.tags(.endToEnd)) struct SeededDatabaseBehaviour {
        @Test func idsJSONWindowsAreContiguousAndIDsHiddenUnlessRevealed() throws {
            let seeded = try SeededDatabase()
            defer { seeded.remove() }
            let store = try Check.openStore(seeded.path)
            let stored = try store.ownIDs()
            try #require(stored.count >= 3 * 96 - 2, "seed should give ~96 ids a day, got \(stored.count)")

            let hidden = try Check.json(seeded.succeeding(["ids", "--json"]).stdout)
            let entries = try #require(hidden["ownIDs"] as? [[String: Any]])
            #expect(entries.count == stored.count)
            var previousEnd: Int64?
            for entry in entries {
                #expect(entry["id"] == nil, "an id was shown without --reveal: \(entry)")
                let tag = try #require(entry["tag"] as? String)
                #expect(tag.hasPrefix("id#") && tag.count == 7, "\(tag)")
                let from = try #require((entry["validFrom"] as? NSNumber)?.int64Value)
                let until = try #require((entry["validUntil"] as? NSNumber)?.int64Value)
                #expect(from < until)
                if let previousEnd { #expect(from == previousEnd, "windows must follow on without gap or overlap") }
                previousEnd = until
            }

            let revealed = try Check.json(seeded.succeeding(["ids", "--json", "--reveal"]).stdout)
            let revealedEntries = try #require(revealed["ownIDs"] as? [[String: Any]])
            let ids = revealedEntries.compactMap { $0["id"] as? String }
            #expect(ids.count == revealedEntries.count)
            for id in ids {
                #expect(id.count == 16 && id.allSatisfy { $0.isHexDigit && !$0.isUppercase }, "\(id)")
            }
            #expect(ids == stored.map(\.id.hex))
        }

        @Test func encountersJSONDaysAndDetails() throws {
            let seeded = try SeededDatabase()
            defer { seeded.remove() }
            let report = try Check.json(seeded.succeeding(["encounters", "--json"]).stdout)
            let days = try #require(report["days"] as? [[String: Any]])
            #expect(report["encounters"] == nil, "details without --details")
            #expect((3...5).contains(days.count), "3 days of data span 3 to 4 calendar days: \(days.count)")
            let names = days.compactMap { $0["day"] as? String }
            #expect(names.count == days.count)
            #expect(names == names.sorted() && Set(names).count == names.count)
            var sightings = 0
            for day in days {
                for key in ["distinctPeerIDs", "encounters", "sightings"] {
                    let value = try #require((day[key] as? NSNumber)?.intValue, "\(key) in \(day)")
                    #expect(value > 0, "\(key) in \(day)")
                }
                sightings += (day["sightings"] as? NSNumber)?.intValue ?? 0
            }
            let stored = try Check.openStore(seeded.path).encounters()
            #expect(sightings == stored.reduce(0) { $0 + $1.sightings })

            let detailed = try Check.json(seeded.succeeding(["encounters", "--json", "--details"]).stdout)
            let entries = try #require(detailed["encounters"] as? [[String: Any]])
            #expect(entries.count == stored.count)
            for entry in entries {
                #expect(entry["peerID"] == nil, "a peer id was shown without --reveal: \(entry)")
                #expect((entry["peerTag"] as? String)?.hasPrefix("id#") == true)
            }

            let revealed = try Check.json(seeded.succeeding(["encounters", "--json", "--details", "--reveal"]).stdout)
            let revealedEntries = try #require(revealed["encounters"] as? [[String: Any]])
            #expect(Set(revealedEntries.compactMap { $0["peerID"] as? String }) == Set(stored.map(\.peer.hex)))
        }

        @Test func fullIDsAppearOnlyWithReveal() throws {
            let seeded = try SeededDatabase()
            defer { seeded.remove() }
            let (own, peers) = try seeded.exportedHexIDs()
            try #require(!own.isEmpty && !peers.isEmpty)
            let all = own.union(peers)

            for arguments in [["ids"], ["encounters"], ["encounters", "--details"], ["ids", "--json"],
                              ["encounters", "--json", "--details"], ["encounters", "--details", "--utc"]] {
                let result = try seeded.succeeding(arguments)
                let leaked = Check.fullHexIDs(in: result.stdout + result.stderr).intersection(all)
                #expect(leaked.isEmpty, "\(arguments) printed \(leaked.count) full id(s)")
            }
            // Daily keys are never shown, not even with --reveal: only export holds them.
            let keys = try #require(Check.json(seeded.succeeding(["export"]).stdout)["dailyKeys"] as? [[String: Any]])
                .compactMap { $0["key"] as? String }
            try #require(!keys.isEmpty)
            for arguments in [["ids", "--reveal"], ["ids", "--json", "--reveal"], ["encounters", "--details", "--reveal"],
                              ["purge", "--json"], ["status"]] {
                let result = try seeded.tracer(arguments)
                let output = (result.stdout + result.stderr).lowercased()
                #expect(!keys.contains { output.contains($0) }, "\(arguments) printed a daily key")
            }
            // The same check finds the ids once they are asked for, so it can fail.
            let ids = try seeded.succeeding(["ids", "--reveal"])
            #expect(Check.fullHexIDs(in: ids.stdout).intersection(all) == own)
            let details = try seeded.succeeding(["encounters", "--details", "--reveal"])
            #expect(Check.fullHexIDs(in: details.stdout).intersection(all) == peers)
        }

        @Test func exportMatchesTheStore() throws {
            let seeded = try SeededDatabase()
            defer { seeded.remove() }
            let result = try seeded.succeeding(["export"])
            let export = try Check.json(result.stdout)
            let store = try Check.openStore(seeded.path)
            let counts = try store.counts()
            let ownIDs = try #require(export["ownIDs"] as? [[String: Any]])
            let encounters = try #require(export["encounters"] as? [[String: Any]])
            #expect(export["format"] as? String == "tracer-export")
            #expect(ownIDs.count == counts.ownIDs)
            #expect(encounters.count == counts.encounters)
            #expect(Set(encounters.compactMap { $0["peerID"] as? String }).count == counts.distinctPeers)
            let exportedSightings = encounters.reduce(0) { $0 + (($1["sightings"] as? NSNumber)?.intValue ?? 0) }
            #expect(exportedSightings == (try store.encounters()).reduce(0) { $0 + $1.sightings })
            #expect(Set(ownIDs.compactMap { $0["id"] as? String }) == Set(try store.ownIDs().map(\.id.hex)))
            #expect((export["schema"] as? [String])?.isEmpty == false)
            #expect((export["formatVersion"] as? NSNumber)?.intValue == 3)

            // Every own id the seed's rotator made is derived from an exported key of its day.
            let keys = try #require(export["dailyKeys"] as? [[String: Any]])
            #expect(keys.count == counts.dailyKeys)
            #expect((3...4).contains(keys.count), "3 days end to end touch 4 UTC days (3 just after midnight): \(keys.count)")
            var keyOfDay: [Int64: DailyKey] = [:]
            for entry in keys {
                let day = try UTCDay(containing: #require((entry["dayStart"] as? NSNumber)?.int64Value))
                #expect(entry["day"] as? String == day.date)
                #expect((entry["intervalSeconds"] as? NSNumber)?.int64Value == 900)
                keyOfDay[day.number] = try DailyKey(hex: #require(entry["key"] as? String))
            }
            let derivation = try IDDerivation(intervalSeconds: 900)
            for own in ownIDs {
                let validFrom = try #require((own["validFrom"] as? NSNumber)?.int64Value)
                let index = try #require(derivation.windowIndex(ofWindowStartingAt: validFrom))
                let key = try #require(keyOfDay[derivation.day(ofWindowIndex: index).number], "no key for \(own)")
                #expect(own["id"] as? String == derivation.id(key: key, windowIndex: index).hex)
            }
        }

        @Test func exportToFileIsPrivate() throws {
            let seeded = try SeededDatabase()
            defer { seeded.remove() }
            let output = seeded.scratch.file("export.json")
            let result = try seeded.succeeding(["export", "-o", output])
            #expect(result.stdout.isEmpty, "\(result)")
            var info = stat()
            try #require(stat(output, &info) == 0, "no file at \(output)")
            #expect(info.st_mode & 0o777 == 0o600, "mode \(String(info.st_mode & 0o777, radix: 8))")
            let written = try Check.json(String(decoding: try Check.bytes(output), as: UTF8.self))
            let counts = try Check.openStore(seeded.path).counts()
            #expect((written["ownIDs"] as? [Any])?.count == counts.ownIDs)
            #expect((written["encounters"] as? [Any])?.count == counts.encounters)
            // No temporary file is left next to it.
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: seeded.scratch.path)
                .filter { $0.hasPrefix(".tracer-") }
            #expect(leftovers.isEmpty, "\(leftovers)")
        }

        @Test func purgeOnFreshDataDeletesNothing() throws {
            let seeded = try SeededDatabase()
            defer { seeded.remove() }
            let before = try Check.openStore(seeded.path).counts()
            let result = try seeded.succeeding(["purge", "--json"])
            let report = try Check.json(result.stdout)
            #expect((report["encountersDeleted"] as? NSNumber)?.intValue == 0, "\(result)")
            #expect((report["ownIDsDeleted"] as? NSNumber)?.intValue == 0, "\(result)")
            let text = try seeded.succeeding(["purge", "--retention-days", "5"])
            #expect(text.stdout.contains("Deleted 0 encounter(s)"), "\(text)")
            #expect(try Check.openStore(seeded.path).counts() == before)
        }

        @Test func forgetYesRemovesEveryFile() throws {
            let seeded = try SeededDatabase()
            defer { seeded.remove() }
            let files = [seeded.path, seeded.path + "-wal", seeded.path + "-shm"]
            do {
                // Hold the store open, as a running node would, so the WAL and shared-memory
                // files exist when forget runs.
                let store = try Check.openStore(seeded.path)
                _ = try store.counts()
                for file in files { #expect(Check.exists(file), "\(file) should exist before forget") }
                let result = try seeded.succeeding(["forget", "--yes"])
                #expect(result.stdout.contains("deleted"), "\(result)")
                for file in files { #expect(!Check.exists(file), "\(file) survived forget") }
            }
            for file in files { #expect(!Check.exists(file), "\(file) reappeared") }

            let after = try seeded.tracer(["ids"])
            #expect(after.exitCode == 0, "\(after)")
            #expect(after.stderr.contains("No Tracer data yet"), "\(after)")
            #expect(after.stdout.contains("No ids recorded yet"), "\(after)")
            #expect(!Check.exists(seeded.path), "a reading command created a database")
        }

        @Test func versionAndHelp() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let version = try Products.tracer(["version"], home: scratch.path)
            #expect(version.exitCode == 0 && !version.signaled, "\(version)")
            #expect(version.stdout.hasPrefix("tracer "), "\(version)")
            #expect(version.stdout.contains("SQLite"), "\(version)")
            let json = try Check.json(try Products.tracer(["version", "--json"], home: scratch.path).stdout)
            #expect(json["tracer"] is String && json["sqlite"] is String)

            for command in [[], ["ids"], ["encounters"], ["export"], ["forget"], ["purge"], ["version"]] {
                let help = try Products.tracer(command + ["--help"], home: scratch.path)
                #expect(help.exitCode == 0 && !help.signaled, "\(command) --help: \(help)")
                #expect(help.stdout.uppercased().contains("USAGE:"), "\(command) --help: \(help)")
                #expect(help.stderr.isEmpty, "\(command) --help: \(help)")
            }
            // Help never opens or creates a database.
            #expect(!Check.exists(scratch.path + "/xdg-data/tracer/tracer.db"))
        }
    }

    @Suite(.tags(.endToEnd)) struct DatabaseLocation {
        static func revealedIDs(_ result: ProcessResult) throws -> [String] {
            try #require(result.exitCode == 0 && !result.signaled, "\(result)")
            let entries = try #require(try Check.json(result.stdout)["ownIDs"] as? [[String: Any]])
            return entries.compactMap { $0["id"] as? String }
        }

        @Test func flagWinsOverEnvironment() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let fromFlag = scratch.file("flag.db"), fromEnvironment = scratch.file("environment.db")
            try Products.seed(fromFlag, home: scratch.path, days: 1, seed: 1)
            try Products.seed(fromEnvironment, home: scratch.path, days: 1, seed: 2)
            let flagIDs = try Check.openStore(fromFlag).ownIDs().map(\.id.hex)
            let environmentIDs = try Check.openStore(fromEnvironment).ownIDs().map(\.id.hex)
            try #require(!flagIDs.isEmpty && !environmentIDs.isEmpty && flagIDs != environmentIDs)

            let both = try Products.tracer(
                ["ids", "--json", "--reveal", "--db", fromFlag], home: scratch.path,
                environment: ["TRACER_DB": fromEnvironment])
            #expect(try Self.revealedIDs(both) == flagIDs)
            let environmentOnly = try Products.tracer(
                ["ids", "--json", "--reveal"], home: scratch.path, environment: ["TRACER_DB": fromEnvironment])
            #expect(try Self.revealedIDs(environmentOnly) == environmentIDs)
            // Neither: the default location, which holds nothing yet.
            let neither = try Products.tracer(["ids", "--json", "--reveal"], home: scratch.path)
            #expect(try Self.revealedIDs(neither).isEmpty)
            #expect(neither.stderr.contains(scratch.path + "/xdg-data/tracer/tracer.db"), "\(neither)")
        }

        @Test func defaultPathIsUnderXDGDataHome() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let dataHome = scratch.file("data-home")
            let expected = dataHome + "/tracer/tracer.db"
            let environment = ["XDG_DATA_HOME": dataHome]

            let empty = try Products.tracer(["ids"], home: scratch.path, environment: environment)
            #expect(empty.exitCode == 0 && empty.stderr.contains(expected), "\(empty)")

            try Products.seed(expected, home: scratch.path, days: 1)
            let seededIDs = try Check.openStore(expected).ownIDs().map(\.id.hex)
            try #require(!seededIDs.isEmpty)
            let found = try Products.tracer(["ids", "--json", "--reveal"], home: scratch.path, environment: environment)
            #expect(try Self.revealedIDs(found) == seededIDs)
            #expect(!found.stderr.contains("No Tracer data"), "\(found)")

            // Without a usable XDG_DATA_HOME the default is ~/.local/share/tracer/tracer.db.
            let home = try Products.tracer(["ids"], home: scratch.path, environment: ["XDG_DATA_HOME": "relative/dir"])
            #expect(home.stderr.contains(scratch.path + "/.local/share/tracer/tracer.db"), "\(home)")
        }
    }
}
