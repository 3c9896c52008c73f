import Foundation
import IDRotation
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// One encounter to put in a node's store: a peer id seen at these times, all within one of
/// the node's own windows.
struct EncounterSpec {
    var peer: UserID
    var ownWindowStart: UnixSeconds
    var times: [UnixSeconds]
    var rssi: [Int8?]
    var txPower: Int8? = nil
    var place: Place? = nil
    /// The RSSI the peer wrote that it heard us at, with the first sighting.
    var reportedRSSI: Int8? = nil

    init(peer: UserID, times: [UnixSeconds], rssi: [Int8?]? = nil, txPower: Int8? = nil, reportedRSSI: Int8? = nil, place: Place? = nil) {
        self.peer = peer
        self.place = place
        self.ownWindowStart = times[0] - times[0] % 3_600
        self.times = times
        self.rssi = rssi ?? times.map { _ in nil }
        self.txPower = txPower
        self.reportedRSSI = reportedRSSI
    }
}

enum NodeFixture {
    /// A store holding these own ids (the node that may report).
    static func makeStore(_ path: String, ownIDs: [OwnID] = [], encounters: [EncounterSpec] = []) throws {
        let store = try Check.openStore(path)
        for ownID in ownIDs { try store.recordOwnID(ownID) }
        var batch = SightingBatch()
        for encounter in encounters {
            for (index, (time, rssi)) in zip(encounter.times, encounter.rssi).enumerated() {
                batch.add(Sighting(
                    peer: encounter.peer, ownWindowStart: encounter.ownWindowStart, time: time, rssi: rssi,
                    txPower: encounter.txPower, reportedRSSI: index == 0 ? encounter.reportedRSSI : nil, learnedBy: .read,
                    place: encounter.place))
            }
        }
        if !batch.isEmpty { try store.write(batch) }
    }

    /// The file's inode and modification time, to tell an untouched file from a rewritten one.
    static func identity(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return "\(status.st_ino)/\(status.st_mtim.tv_sec).\(status.st_mtim.tv_nsec)/\(status.st_size)"
    }

    /// The list files of a cache directory (not state.json, which records every attempt), by name.
    static func listFiles(in cache: String) -> [String: Data] {
        var files: [String: Data] = [:]
        for name in ["index.tpli", "index.etag", "log/state", "log/entries", "log/checkpoint.etag"] {
            files[name] = FileManager.default.contents(atPath: cache + "/" + name)
        }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: cache + "/batches")) ?? [] {
            files["batches/" + name] = FileManager.default.contents(atPath: cache + "/batches/" + name)
        }
        return files
    }
}
