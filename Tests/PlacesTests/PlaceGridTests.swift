import Foundation
import IDRotation
@testable import Places
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct PlaceGridTests {
    /// Metres between two points (haversine), to check what a cell promises.
    static func metres(_ a: (Double, Double), _ b: (Double, Double)) -> Double {
        let (lat1, lon1, lat2, lon2) = (a.0 * .pi / 180, a.1 * .pi / 180, b.0 * .pi / 180, b.1 * .pi / 180)
        let h = pow(sin((lat2 - lat1) / 2), 2) + cos(lat1) * cos(lat2) * pow(sin((lon2 - lon1) / 2), 2)
        return 2 * 6_371_000 * asin(min(1, sqrt(h)))
    }

    @Test func aPositionBecomesTheCentreOfItsCellWithinHalfACellDiagonal() throws {
        for (latitude, longitude) in [(52.520008, 13.404954), (-33.8688, 151.2093), (0.0, 0.0), (64.1466, -21.9426), (78.2232, 15.6267)] {
            for precision in [10, 100, 1_000, 25_000] {
                let cell = try #require(PlaceGrid.cell(latitude: latitude, longitude: longitude, precisionMeters: precision))
                #expect(cell.precisionMeters == precision)
                // Cells are about precision × precision metres: the fix is within half a diagonal (plus rounding slack).
                let distance = Self.metres((latitude, longitude), (cell.latitude, cell.longitude))
                #expect(distance <= Double(precision) * 0.75, "\(latitude),\(longitude) at \(precision) m is \(distance) m from its cell centre")
            }
        }
    }

    @Test func nearbyFixesShareACellAndTheCellIsStable() throws {
        let a = try #require(PlaceGrid.cell(latitude: 52.52001, longitude: 13.40501, precisionMeters: 100))
        let b = try #require(PlaceGrid.cell(latitude: 52.52002, longitude: 13.40502, precisionMeters: 100))
        #expect(a == b)
        // The centre of a cell rounds to itself: storing, reading back and rounding again changes nothing.
        #expect(PlaceGrid.cell(latitude: a.latitude, longitude: a.longitude, precisionMeters: 100) == a)
        // 300 m east is another cell.
        let east = try #require(PlaceGrid.cell(latitude: 52.52001, longitude: 13.40501 + 300 / (111_320 * cos(52.52 * .pi / 180)), precisionMeters: 100))
        #expect(east != a)
        #expect(Self.metres((a.latitude, a.longitude), (east.latitude, east.longitude)) > 200)
    }

    @Test func theFixItselfIsNotStored() throws {
        let cell = try #require(PlaceGrid.cell(latitude: 52.520008, longitude: 13.404954, precisionMeters: 100))
        #expect(cell.latitude != 52.520008 && cell.longitude != 13.404954)
    }

    @Test func polesSeamAndBadInputGiveACellOrNilNeverATrap() {
        for (latitude, longitude) in [(90.0, 0.0), (-90.0, 180.0), (89.9999, -180.0), (0.0, 180.0), (0.0, -180.0)] {
            let cell = PlaceGrid.cell(latitude: latitude, longitude: longitude, precisionMeters: 100)
            #expect(cell != nil)
            if let cell {
                #expect((-90.0...90.0).contains(cell.latitude) && (-180.0...180.0).contains(cell.longitude))
            }
        }
        for (latitude, longitude) in [(Double.nan, 0.0), (0.0, .infinity), (90.0001, 0.0), (0.0, -180.5), (-.infinity, .nan)] {
            #expect(PlaceGrid.cell(latitude: latitude, longitude: longitude, precisionMeters: 100) == nil)
        }
        #expect(PlaceGrid.cell(latitude: 1, longitude: 1, precisionMeters: 0) == nil)
        #expect(PlaceGrid.cell(latitude: 1, longitude: 1, precisionMeters: 9) == nil)
        #expect(PlaceGrid.cell(latitude: 1, longitude: 1, precisionMeters: Int.max) == nil)
        #expect(PlaceGrid.cell(latitude: 1, longitude: 1, precisionMeters: Int.min) == nil)
    }

    @Test func positionTextHasTheDecimalsItsCellNeeds() {
        #expect(Place.Position(latitude: 52.52046, longitude: 13.40612, precisionMeters: 100).text == "52.5205, 13.4061 (100 m cell)")
        #expect(Place.Position(latitude: 52.52045, longitude: 13.40612, precisionMeters: 10_000).text == "52.52, 13.41 (10000 m cell)")
        #expect(Place(name: nil, position: nil) == nil)
        #expect(Place(name: "Bus 42", position: Place.Position(latitude: 1.5, longitude: 2.5, precisionMeters: 1_000))?.text == "Bus 42 at 1.500, 2.500 (1000 m cell)")
    }
}

@Suite(.tags(.unit)) struct GPSDReportTests {
    static func report(_ text: String) -> GPSDReport { GPSDReport(line: Array(text.utf8)) }

    /// Lines as gpsd's protocol documentation (gpsd_json(5)) and gpsd 3.22 itself write them.
    @Test func tpvWithA2DOr3DFixIsAPosition() {
        #expect(Self.report(#"{"class":"TPV","device":"/dev/pts/1","time":"2005-06-08T10:34:48.283Z","ept":0.005,"lat":46.498293369,"lon":7.567411672,"alt":1343.127,"eph":36.000,"epv":32.321,"track":10.3788,"speed":0.091,"climb":-0.085,"mode":3}"#)
            == .fix(latitude: 46.498293369, longitude: 7.567411672))
        #expect(Self.report(#"{"class":"TPV","device":"/dev/pts/1","mode":2,"time":"2026-11-25T10:00:09.000Z","ept":0.005,"lat":52.520090000,"lon":13.405990000,"track":81.0000,"speed":8.025}"#)
            == .fix(latitude: 52.52009, longitude: 13.40599))
    }

    @Test func tpvWithoutAFixIsNoFix() {
        #expect(Self.report(#"{"class":"TPV","device":"/dev/pts/1","mode":1}"#) == .noFix)
        #expect(Self.report(#"{"class":"TPV","device":"/dev/pts/1","mode":0,"lat":1.0,"lon":2.0}"#) == .noFix)
        #expect(Self.report(#"{"class":"TPV","mode":3}"#) == .noFix)
        #expect(Self.report(#"{"class":"TPV","mode":3,"lat":91.0,"lon":2.0}"#) == .noFix)
        #expect(Self.report(#"{"class":"TPV","mode":3,"lat":1.0,"lon":-181.0}"#) == .noFix)
    }

    @Test func otherClassesAreIgnored() {
        #expect(Self.report(#"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"#) == .ignored)
        #expect(Self.report(#"{"class":"DEVICES","devices":[{"class":"DEVICE","path":"/dev/pts/1","native":0,"bps":4800}]}"#) == .ignored)
        #expect(Self.report(#"{"class":"WATCH","enable":true,"json":true,"nmea":false,"raw":0,"scaled":false,"timing":false,"split24":false,"pps":false}"#) == .ignored)
        #expect(Self.report(#"{"class":"SKY","device":"/dev/pts/1","satellites":[{"PRN":10,"el":45,"az":196,"ss":34,"used":true}],"lat":1.0,"lon":1.0,"mode":3}"#) == .ignored)
        #expect(Self.report(#"{"class":"ERROR","message":"Unrecognized request '?FOO'"}"#) == .ignored)
    }

    @Test func hostileLinesNeverTrap() {
        let lines = [
            "", "{", "}", "null", "[]", "\"TPV\"", "{\"class\":\"TPV\",\"mode\":\"3\",\"lat\":1,\"lon\":2}",
            "{\"class\":\"TPV\",\"mode\":99999999999999999999999,\"lat\":1,\"lon\":2}",
            "{\"class\":\"TPV\",\"mode\":3,\"lat\":1e999,\"lon\":2}", "{\"class\":\"TPV\",\"mode\":3,\"lat\":\"NaN\",\"lon\":2}",
            "{\"class\":\"TPV\",\"mode\":3,\"lat\":[1],\"lon\":{}}", "{\"class\":7}",
            String(repeating: "[", count: 100_000), "{\"class\":\"TPV\",\"mode\":3,\"lat\":1,\"lon\":2" + String(repeating: " ", count: 70_000) + "}",
        ]
        for line in lines {
            let report = Self.report(line)
            if case .fix = report { Issue.record("\(line.prefix(60)) gave a fix") }
        }
        // Random bytes: any answer, but no trap.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let bytes = (0..<Int.random(in: 0..<200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = GPSDReport(line: bytes)
        }
    }

    @Test func theLineSplitterDropsOverlongLinesWhole() {
        var splitter = LineSplitter()
        #expect(splitter.append(Array("{\"a\":1}\n{\"b\"".utf8)) == [Array("{\"a\":1}".utf8)])
        #expect(splitter.append(Array(":2}\n".utf8)) == [Array("{\"b\":2}".utf8)])
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: GPSDReport.maximumLineBytes + 10)
        #expect(splitter.append(long).isEmpty)
        #expect(splitter.append(Array("tail\nnext\n".utf8)) == [Array("next".utf8)])
    }
}

@Suite(.tags(.unit)) struct PlaceBoardTests {
    @Test func aStaleFixIsNoFixAndANameStays() {
        let board = PlaceBoard(name: "Bus 42", maximumFixAge: .seconds(30))
        let start = ContinuousClock.now
        #expect(board.current(at: start) == Place(name: "Bus 42", position: nil))
        let cell = Place.Position(latitude: 1.5, longitude: 2.5, precisionMeters: 100)
        board.record(cell, at: start)
        #expect(board.current(at: start + .seconds(30))?.position == cell)
        #expect(board.current(at: start + .seconds(31)) == Place(name: "Bus 42", position: nil))
        board.record(cell, at: start + .seconds(40))
        board.record(nil, at: start + .seconds(41))
        #expect(board.current(at: start + .seconds(41))?.position == nil)
        let unnamed = PlaceBoard(name: nil, maximumFixAge: .seconds(30))
        #expect(unnamed.current() == nil)
        unnamed.record(cell)
        #expect(unnamed.current() == Place(name: nil, position: cell))
    }
}

@Suite(.tags(.unit)) struct PlaceVisitTests {
    static func encounter(_ first: UnixSeconds, _ last: UnixSeconds, _ place: Place?) -> Encounter {
        var encounter = Encounter(Sighting(peer: .random(), ownWindowStart: first, time: first, place: place))
        encounter.lastSeen = last
        return encounter
    }

    @Test func encountersAtAPlaceJoinIntoVisitsAndCarryNoIDs() throws {
        let library = try #require(Place(name: "Library", position: nil))
        let bus = try #require(Place(name: "Bus 42", position: nil))
        let visits = PlaceVisit.visits(of: [
            Self.encounter(1_000, 1_100, library), Self.encounter(1_050, 1_500, library),
            Self.encounter(2_000, 2_100, bus), Self.encounter(1_500 + PlaceVisit.joiningGap + 1, 9_999, library),
            Self.encounter(3_000, 3_100, nil),
        ])
        #expect(visits == [
            PlaceVisit(place: library, from: 1_000, until: 1_500, encounters: 2),
            PlaceVisit(place: bus, from: 2_000, until: 2_100, encounters: 1),
            PlaceVisit(place: library, from: 1_500 + PlaceVisit.joiningGap + 1, until: 9_999, encounters: 1),
        ])
    }
}
