import HTTPTypes
import Hummingbird
import PositiveListServer

/// Every route the server answers, as it is added to the router, so that a known path asked
/// with another method gets 405 and `Allow` (RFC 9110, 15.5.6) instead of the 404 Hummingbird's
/// router gives both it and an unknown path.
///
/// Built once, before the server starts, then only read.
package struct RouteTable: Sendable {
    private var routes: [(path: RouterPath, method: HTTPRequest.Method)] = []

    package init() {}

    /// Adds `handler` to `router` for `method` on `path`, and remembers the pair.
    package mutating func add(
        _ path: RouterPath, _ method: HTTPRequest.Method, to router: Router<PositiveListRequestContext>,
        handler: @escaping @Sendable (Request, PositiveListRequestContext) async throws -> Response
    ) {
        router.on(path, method: method, use: handler)
        routes.append((path, method))
    }

    /// Every routed pattern as the router names it (`context.endpointPath`), such as
    /// `/log/tile/**`: the metrics' route label takes its values from these only.
    package var patterns: Set<String> { Set(routes.map(\.path.description)) }

    /// The methods routed for `path`, in the order they were added; nil when no route has
    /// that path. Matches as the router does: component by component, `:name` matching any one,
    /// `**` the rest of the path (one component or more).
    func allowedMethods(path: String) -> [HTTPRequest.Method]? {
        let components = path.split(separator: "/", omittingEmptySubsequences: true)
        let matching = routes.filter { Self.matches($0.path, components) }
        return matching.isEmpty ? nil : matching.map(\.method)
    }

    private static func matches(_ route: RouterPath, _ components: [Substring]) -> Bool {
        for (position, element) in route.components.enumerated() {
            guard position < components.count else { return false }
            if element == .recursiveWildcard { return true }
            guard element ~= components[position] else { return false }
        }
        return route.components.count == components.count
    }
}
