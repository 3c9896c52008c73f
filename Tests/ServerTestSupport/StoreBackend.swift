import Foundation
import PositiveListServer
import Synchronization
import Testing
import TracerTestSupport

/// The two back ends of ``SubmissionStore`` and ``ConsoleStore``, which every suite that runs
/// over both takes as its argument.
package enum StoreBackend: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres

    package var testDescription: String { rawValue }
}

/// One PostgreSQL server for a whole suite, started at the first test that needs it (each test
/// then gets a database of its own) and stopped when the suite ends: starting a server takes
/// about a second, a database a few milliseconds.
package struct SharedPostgres: SuiteTrait, TestScoping {
    @TaskLocal package static var current: SharedPostgres?

    private final class Server: Sendable {
        let process = Mutex<PostgresProcess?>(nil)
    }

    private let server = Server()

    package var isRecursive: Bool { false }

    package func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        defer { server.process.withLock { $0?.stop() } }
        try await Self.$current.withValue(self) { try await function() }
    }

    /// A fresh empty database on the suite's server.
    package func createDatabase() throws -> String {
        try server.process.withLock { server in
            if server == nil { server = try PostgresProcess() }
            return try server!.createDatabase("test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))
        }
    }

    /// A fresh empty database on the running suite's server; the suite needs the
    /// `.sharedPostgres` trait.
    package static func createDatabase() throws -> String {
        guard let current else {
            throw HarnessFailure(description: "this suite needs the .sharedPostgres trait for a PostgreSQL database")
        }
        return try current.createDatabase()
    }
}

package extension Trait where Self == SharedPostgres {
    static var sharedPostgres: SharedPostgres { SharedPostgres() }
}
