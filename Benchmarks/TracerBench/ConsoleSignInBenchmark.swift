import Foundation
import PositiveListServer
import ServerStorage

/// Issue 28's sign-in cost: how long the console's scrypt check of one password takes (what
/// every sign-in, right or wrong, costs the server), and what the attempt limit then allows.
struct ConsoleSignInBenchmark {
    let rounds: Int
    let attemptsPerMinute: Int

    func run() throws {
        say("# Console sign-in cost (\(Date()))")
        let hash = try PasswordHash.make(password: "correct horse battery staple")
        var times: [Double] = []
        for round in 0..<rounds {
            let start = ContinuousClock.now
            let matched = hash.verify(round % 2 == 0 ? "correct horse battery staple" : "wrong password guess")
            let elapsed = ContinuousClock.now - start
            precondition(matched == (round % 2 == 0))
            times.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
        }
        times.sort()
        let median = times[times.count / 2]
        say(String(format: "scrypt N=2^15 r=8 p=1 (32 MiB), %d checks: median %.1f ms, min %.1f ms, max %.1f ms", rounds, median, times.first!, times.last!))
        say(String(
            format: "at failedAttemptsPerMinute=%d: one address or one account costs the server at most %.0f ms of one core a minute in failed checks (%.2f%%), and an online guesser gets %d guesses a minute per account",
            attemptsPerMinute, Double(attemptsPerMinute) * median, Double(attemptsPerMinute) * median / 600, attemptsPerMinute))
        say(String(format: "offline, from a stolen server.db: %.0f guesses a second per core", 1_000 / median))
    }
}
