import Testing

/// The matching module's suites (fetching with libcurl, matching, risk scoring).
enum MatchingTests {}
