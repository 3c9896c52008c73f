import ArgumentParser
import Foundation
import IDRotation
import PositiveListServer
#if canImport(Glibc)
import Glibc
#endif

struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console", abstract: "Manages the staff console's accounts (see the console section of the configuration).",
        subcommands: [AddAccount.self])
}

struct AddAccount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-account", abstract: "Creates a console account (staff unless --role operator; make the first one an operator).",
        discussion: """
            The password is read from the terminal, typed twice and not shown; with --password-stdin, from the first \
            line of standard input, for scripts. It is never an argument: arguments are visible to every user of the \
            host (ps) and kept in shell histories.
            """)

    @OptionGroup var location: LocationOptions

    @Option(help: "staff (issues codes) or operator (also sees the operator pages).")
    var role: String = "staff"

    @Flag(name: .customLong("password-stdin"), help: "Read the password from the first line of standard input.")
    var passwordFromStandardInput = false

    @Argument(help: "The account name the person signs in with (letters, digits, . _ - @; at most 64).")
    var name: String

    func validate() throws {
        guard ConsoleAccount.Role(rawValue: role) != nil else { throw ValidationError("--role must be staff or operator.") }
    }

    func run() async throws {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")
        guard (1...64).contains(name.count), name.unicodeScalars.allSatisfy(allowed.contains) else {
            throw CommandFailure.invalidAccountName(name)
        }
        let configuration = try location.loadConfigurationIfPresent()
        if configuration?.database != nil { throw CommandFailure.consoleNeedsSQLite }
        let password = try readPassword()
        if let problem = PasswordProblem.check(password) { throw problem }
        let hash = try PasswordHash.make(password: password)
        guard let store = try await location.openStore(configuration: configuration) as? ServerStore else { throw CommandFailure.consoleNeedsSQLite }
        guard try await store.createConsoleAccount(name: name, role: ConsoleAccount.Role(rawValue: role)!, passwordHash: hash, now: SystemWallClock().now())
        else { throw CommandFailure.accountExists(name) }
        print("Created the \(role) account \(name).")
    }

    private func readPassword() throws -> String {
        if passwordFromStandardInput {
            guard let line = readLine(strippingNewline: true) else { throw CommandFailure.passwordNotSet("standard input was empty; send the password as its first line.") }
            return line
        }
        guard isatty(STDIN_FILENO) == 1 else {
            throw CommandFailure.passwordNotSet("standard input is not a terminal; type the password at a terminal, or pass --password-stdin and send it on standard input.")
        }
        let first = try Self.readHidden(prompt: "Password for \(name): ")
        let second = try Self.readHidden(prompt: "The same password again: ")
        guard first == second else { throw CommandFailure.passwordNotSet("the two passwords differ; run the command again.") }
        return first
    }

    /// One line from the terminal with echo off, restored afterwards whatever happens.
    private static func readHidden(prompt: String) throws -> String {
        FileHandle.standardError.write(Data(prompt.utf8))
        var original = termios()
        tcgetattr(STDIN_FILENO, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        guard let line = readLine(strippingNewline: true) else { throw CommandFailure.passwordNotSet("no password was typed.") }
        return line
    }
}
