import ArgumentParser
import AuthorityConsole
import Foundation
import PositiveListServer
#if canImport(Glibc)
import Glibc
import ServerStorage
import TracerCore
#endif

struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console", abstract: "Manages the staff console's accounts (see the console section of the configuration).",
        subcommands: [AddAccount.self, DisableAccount.self, EnableAccount.self, SetPassword.self])
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
        guard ConsoleAccountName.isValid(name) else { throw CommandFailure.invalidAccountName(name) }
        let configuration = try location.loadConfigurationIfPresent()
        let password = try ConsolePassword.read(for: name, fromStandardInput: passwordFromStandardInput)
        if let problem = PasswordProblem.check(password) { throw problem }
        let hash = try PasswordHash.make(password: password)
        let store = try await location.openConsoleStore(configuration: configuration)
        guard try await store.createConsoleAccount(
            name: name, role: ConsoleAccount.Role(rawValue: role)!, passwordHash: hash, link: nil, by: .commandLine, now: SystemWallClock().now())
        else { throw CommandFailure.accountExists(name) }
        print("Created the \(role) account \(name).")
    }
}

struct DisableAccount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disable-account", abstract: "Disables a console account: its sessions end at once and it cannot sign in until enabled.")

    @OptionGroup var location: LocationOptions

    @Argument(help: "The account's name.")
    var name: String

    func run() async throws {
        try await location.setConsoleAccount(name, disabled: true)
        print("Disabled the account \(name); its sessions have ended.")
    }
}

struct EnableAccount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "enable-account", abstract: "Enables a disabled console account again.")

    @OptionGroup var location: LocationOptions

    @Argument(help: "The account's name.")
    var name: String

    func run() async throws {
        try await location.setConsoleAccount(name, disabled: false)
        print("Enabled the account \(name).")
    }
}

struct SetPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-password", abstract: "Sets a console account's password; its sessions and set-password links end.",
        discussion: "The password is read as by add-account: from the terminal, typed twice, or with --password-stdin from standard input.")

    @OptionGroup var location: LocationOptions

    @Flag(name: .customLong("password-stdin"), help: "Read the password from the first line of standard input.")
    var passwordFromStandardInput = false

    @Argument(help: "The account's name.")
    var name: String

    func run() async throws {
        let store = try await location.openConsoleStore(configuration: try location.loadConfigurationIfPresent())
        let password = try ConsolePassword.read(for: name, fromStandardInput: passwordFromStandardInput)
        if let problem = PasswordProblem.check(password) { throw problem }
        let hash = try PasswordHash.make(password: password)
        guard try await store.resetConsolePassword(name: name, passwordHash: hash, link: nil, by: .commandLine, now: SystemWallClock().now()) else {
            throw CommandFailure.noSuchAccount(name)
        }
        print("Set the password of \(name); its sessions have ended.")
    }
}

extension LocationOptions {
    /// The configured store (SQLite or PostgreSQL), which keeps the console's accounts.
    func openConsoleStore(configuration: ServerConfiguration?) async throws -> any ConsoleStore {
        guard let store = try await openStore(configuration: configuration) as? any ConsoleStore else { throw CommandFailure.storeWithoutConsole }
        return store
    }
}

/// A password from the terminal (typed twice, not shown) or from standard input's first line;
/// never from the arguments, which every user of the host sees (ps) and shells keep.
enum ConsolePassword {
    static func read(for name: String, fromStandardInput: Bool) throws -> String {
        if fromStandardInput {
            guard let line = readLine(strippingNewline: true) else { throw CommandFailure.passwordNotSet("standard input was empty; send the password as its first line.") }
            return line
        }
        guard isatty(STDIN_FILENO) == 1 else {
            throw CommandFailure.passwordNotSet("standard input is not a terminal; type the password at a terminal, or pass --password-stdin and send it on standard input.")
        }
        let first = try readHidden(prompt: "Password for \(name): ")
        let second = try readHidden(prompt: "The same password again: ")
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

extension LocationOptions {
    /// Disables or enables an account from the command line, as the audit log records it.
    func setConsoleAccount(_ name: String, disabled: Bool) async throws {
        let store = try await openConsoleStore(configuration: try loadConfigurationIfPresent())
        guard try await store.setConsoleAccountDisabled(name: name, disabled, by: .commandLine, now: SystemWallClock().now()) else {
            throw CommandFailure.noSuchAccount(name)
        }
    }
}
