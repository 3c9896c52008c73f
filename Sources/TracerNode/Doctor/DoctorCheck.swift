/// One line of `tracer doctor`: what was checked, whether it passed, and what to do if not.
struct DoctorCheck: Encodable, Equatable {
    enum Outcome: String, Encodable {
        case pass, fail, skipped
        /// Facts to act on, neither passed nor failed (the kernel's adapters).
        case info
    }

    var name: String
    var outcome: Outcome
    var detail: String
    /// What the user can do about a failure.
    var fix: String?

    static func pass(_ name: String, _ detail: String) -> DoctorCheck {
        DoctorCheck(name: name, outcome: .pass, detail: detail)
    }

    static func fail(_ name: String, _ detail: String, fix: String) -> DoctorCheck {
        DoctorCheck(name: name, outcome: .fail, detail: detail, fix: fix)
    }

    static func info(_ name: String, _ detail: String) -> DoctorCheck {
        DoctorCheck(name: name, outcome: .info, detail: detail)
    }

    static func skipped(_ name: String, _ detail: String) -> DoctorCheck {
        DoctorCheck(name: name, outcome: .skipped, detail: detail)
    }
}
