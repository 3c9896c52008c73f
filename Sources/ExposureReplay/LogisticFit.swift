import Foundation
import Matching

/// Fits `LogisticScore`'s coefficients by iteratively reweighted least squares (Newton's method on
/// the log-likelihood), with a small ridge penalty so that a feature that separates the training
/// labels perfectly cannot send its coefficient to infinity. Features are standardised for the
/// fit and the coefficients given back on the raw scale the node computes.
public struct LogisticFit: Sendable {
    /// The ridge penalty on the standardised coefficients (not on the intercept).
    public var ridge: Double
    public var iterations: Int
    /// Which features take part (indices into `LogisticScore.featureNames`); the others get 0.
    public var features: [Int]

    public init(ridge: Double = 1, iterations: Int = 30, features: [Int] = Array(LogisticScore.featureNames.indices)) {
        self.ridge = ridge
        self.iterations = iterations
        self.features = features
    }

    /// The intercept and one coefficient per feature of `LogisticScore.featureNames` (0 for those
    /// not in `features`), on the raw scale. nil without both classes.
    public func fit(_ examples: [(inputs: [Double], truth: Bool)]) -> (intercept: Double, coefficients: [Double])? {
        guard examples.contains(where: \.truth), examples.contains(where: { !$0.truth }) else { return nil }
        let count = Double(examples.count)
        let means = features.map { feature in examples.reduce(0) { $0 + $1.inputs[feature] } / count }
        let deviations = features.indices.map { index in
            let variance = examples.reduce(0) { $0 + pow($1.inputs[features[index]] - means[index], 2) } / count
            return variance > 0 ? variance.squareRoot() : 1
        }
        let rows = examples.map { example in
            [1.0] + features.indices.map { (example.inputs[features[$0]] - means[$0]) / deviations[$0] }
        }
        let size = features.count + 1
        var beta = [Double](repeating: 0, count: size)
        for _ in 0..<iterations {
            var hessian = [[Double]](repeating: [Double](repeating: 0, count: size), count: size)
            var gradient = [Double](repeating: 0, count: size)
            for (row, example) in zip(rows, examples) {
                let logit = zip(beta, row).reduce(0) { $0 + $1.0 * $1.1 }
                let p = 1 / (1 + exp(-logit))
                let residual = (example.truth ? 1 : 0) - p
                let weight = max(p * (1 - p), 1e-9)
                for i in 0..<size {
                    gradient[i] += residual * row[i]
                    for j in 0..<size { hessian[i][j] += weight * row[i] * row[j] }
                }
            }
            for i in 1..<size {
                gradient[i] -= ridge * beta[i]
                hessian[i][i] += ridge
            }
            guard let step = Self.solve(hessian, gradient) else { break }
            for i in 0..<size { beta[i] += step[i] }
            if step.map(abs).max() ?? 0 < 1e-10 { break }
        }
        var coefficients = [Double](repeating: 0, count: LogisticScore.featureNames.count)
        var intercept = beta[0]
        for (index, feature) in features.enumerated() {
            coefficients[feature] = beta[index + 1] / deviations[index]
            intercept -= beta[index + 1] * means[index] / deviations[index]
        }
        return (intercept, coefficients)
    }

    /// Solves `matrix · x = vector` by Gaussian elimination with partial pivoting; nil if singular.
    static func solve(_ matrix: [[Double]], _ vector: [Double]) -> [Double]? {
        var a = matrix, b = vector
        let n = b.count
        for column in 0..<n {
            guard let pivot = (column..<n).max(by: { abs(a[$0][column]) < abs(a[$1][column]) }), abs(a[pivot][column]) > 1e-12 else { return nil }
            a.swapAt(column, pivot)
            b.swapAt(column, pivot)
            for row in (column + 1)..<n {
                let factor = a[row][column] / a[column][column]
                for k in column..<n { a[row][k] -= factor * a[column][k] }
                b[row] -= factor * b[column]
            }
        }
        var x = [Double](repeating: 0, count: n)
        for row in stride(from: n - 1, through: 0, by: -1) {
            let sum = ((row + 1)..<n).reduce(0) { $0 + a[row][$1] * x[$1] }
            x[row] = (b[row] - sum) / a[row][row]
        }
        return x
    }
}
