/// The positive list server: health authorities append the id histories of diagnosed people,
/// and the server publishes them as signed static files. Its implementation arrives with the
/// positive-list-server issue; this namespace exists so the package layout is complete.
public enum PositiveListServer {}
