/// Matching fetches the published positive list, verifies it, and matches it against the
/// encounters in the node's store, locally. Its implementation arrives with the matching issue;
/// this namespace exists so the package layout is complete.
public enum Matching {}
