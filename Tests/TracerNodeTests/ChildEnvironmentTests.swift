import IDRotation
import Testing
import TestTiers
import TracerTestSupport

extension TracerNodeTests {
    /// The child processes of the tests never see the variable that would send them to the
    /// user's real database: the test support names it as the node does.
    @Suite(.tags(.unit)) struct ChildEnvironmentTests {
        @Test func theNodesDatabaseVariableIsNotInherited() {
            #expect(Products.variablesNotInherited.contains(StoreLocation.environmentVariable))
            #expect(Products.environment(home: "/scratch")[StoreLocation.environmentVariable] == nil)
        }
    }
}
