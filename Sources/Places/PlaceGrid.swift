import Foundation
import IDRotation

/// Rounds a position to the centre of its cell on a fixed grid, so the node stores "somewhere in
/// this cell" and never the fix itself.
///
/// The grid: rows of equal latitude height (`precision` metres, 111,320 m a degree), each row cut
/// into cells of about `precision` metres of longitude at the row's middle latitude (a whole
/// number of cells around the globe, so the ±180° seam is a cell edge). Cells are therefore about
/// precision × precision metres everywhere, unlike decimal-degree rounding, whose cells shrink to
/// slivers towards the poles and come only in powers of ten; and unlike geohash, whose sizes jump
/// by a factor of 4 to 8 between levels, the user's precision is the cell size. A cell depends on
/// the fix alone (not on earlier fixes), so the same spot always stores the same cell.
public enum PlaceGrid {
    public static let metresPerDegree = 111_320.0
    /// The precisions a user may choose, in metres.
    public static let precisionRange = 10...100_000
    public static let defaultPrecision = 100

    /// nil for a position that is not on the globe (not finite, out of range) or a precision
    /// outside `precisionRange`.
    public static func cell(latitude: Double, longitude: Double, precisionMeters: Int) -> Place.Position? {
        guard latitude.isFinite, longitude.isFinite, (-90.0...90.0).contains(latitude), (-180.0...180.0).contains(longitude),
            precisionRange.contains(precisionMeters)
        else { return nil }
        let rowHeight = Double(precisionMeters) / metresPerDegree
        let rowCount = (180 / rowHeight).rounded(.up)
        let row = min(((latitude + 90) / rowHeight).rounded(.down), rowCount - 1)
        let rowMiddle = min(-90 + (row + 0.5) * rowHeight, 90)
        // Near a pole a row's circumference shrinks towards nothing: at least one cell.
        let circumferenceMetres = 360 * metresPerDegree * cos(rowMiddle * .pi / 180)
        let cellsInRow = max(1, (circumferenceMetres / Double(precisionMeters)).rounded(.down))
        let cellWidth = 360 / cellsInRow
        let column = min(((longitude + 180) / cellWidth).rounded(.down), cellsInRow - 1)
        return Place.Position(
            latitude: rowMiddle, longitude: -180 + (column + 0.5) * cellWidth, precisionMeters: precisionMeters)
    }
}
