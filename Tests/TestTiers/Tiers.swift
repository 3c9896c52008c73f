import Testing

/// The test tiers (issue 27): every suite carries exactly one, so a developer can run the fast tier
/// alone (`scripts/test-unit`) and CI still runs all three. `scripts/test-tiers check` (run by
/// scripts/test) fails on a test in no tier.
extension Tag {
    /// In-process only: no subprocess, no network beyond loopback inside the process, no emulator;
    /// each test finishes well under a second.
    @Tag public static var unit: Self
    /// Real parts beside our code: Bumble, RootCanal, PostgreSQL, nginx, a real server process, curl.
    @Tag public static var integration: Self
    /// Several of our processes together: CLI runs, crowds, the kernel bed, the browser.
    @Tag public static var endToEnd: Self
}
