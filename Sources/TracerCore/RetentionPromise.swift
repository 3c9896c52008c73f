/// The promise made to users: nothing a node records is kept longer than this, so nothing older
/// is of use to it. The node's retention policy may be shorter, never longer; the server keeps
/// the list log's history at least this long, so that any node can still match what it holds.
public enum RetentionPromise {
    public static let maximumDays = 28
}
