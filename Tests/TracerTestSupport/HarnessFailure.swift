/// A test harness or benchmark could not do its part (a missing executable, a child that did not
/// start or answer): the thrown error says what, so the failing test or benchmark says why.
public struct HarnessFailure: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) {
        self.description = description
    }
}
