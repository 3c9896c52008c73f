extension LEHost {
    /// What an audit found the controller doing differently from what this host believed.
    public struct AuditFindings: Sendable, Equatable {
        public var advertisingWasOff = false
        public var scanningWasOff = false
        public var strayInitiationEnded = false
        public var isClean: Bool { !advertisingWasOff && !scanningWasOff && !strayInitiationEnded }
    }

    /// Checks that the controller advertises, scans and does not initiate as this host believes,
    /// and mends what differs. HCI has no command that reads these states, so it asks questions
    /// whose answers depend on them: setting advertising or scan parameters is refused while that
    /// role is on (Core Vol 4 Part E 7.8.5, 7.8.10), and a connection cancel is refused when no
    /// attempt is under way (7.8.13). A lenient controller that accepts everything only gets its
    /// roles enabled again, which is harmless.
    ///
    /// One procedure: it never runs while a connection attempt is under way, so it cannot turn
    /// advertising on beside an attempt that turned it off (`connect(advertisingOff:)`), nor
    /// between the steps of an address change.
    public func audit() async -> AuditFindings {
        guard !lost else { return AuditFindings() }
        return (try? await procedure { () async throws(GAPError) -> AuditFindings in await self.auditNow() }) ?? AuditFindings()
    }

    private func auditNow() async -> AuditFindings {
        var findings = AuditFindings()
        guard !lost else { return findings }
        if let payload = advertisement {
            let interval = configuration.advertisingInterval
            do {
                try await hci.send(LESetAdvertisingParameters(intervalMin: interval, intervalMax: interval))
                // Accepted, so advertising was off (or the controller does not check): turn it on.
                findings.advertisingWasOff = true
                advertisingIsOn = false
                // Unless advertising was withdrawn meanwhile (an address change waits to run next).
                if advertisement == payload {
                    do {
                        try await enableAdvertising(payload)
                        noteAdvertisingWorks()
                    } catch {
                        noteAdvertising(failed: error)
                    }
                }
            } catch HCIError.commandFailed(_, .commandDisallowed) {
                advertisingIsOn = true
                noteAdvertisingWorks()
            } catch {
                noteAdvertising(failed: lost ? .controllerLost : .hci(error))
            }
        }
        if scanning {
            do {
                try await hci.send(LESetScanParameters(
                    scanType: .passive, interval: configuration.scanInterval, window: configuration.scanWindow))
                findings.scanningWasOff = true
                scanEnabled = false
                do {
                    try await enableScanning()
                    noteScanningWorks()
                } catch {
                    noteScanning(failed: error)
                }
            } catch HCIError.commandFailed(_, .commandDisallowed) {
                // Refused while scanning is on: on, even after an enable that went unanswered.
                scanEnabled = true
                noteScanningWorks()
            } catch {
                noteScanning(failed: lost ? .controllerLost : .hci(error))
            }
        }
        // No attempt of ours is under way during a procedure; and only where a cancel means something.
        if !quirks.contains(.cancelTakenWithoutEndingAttempt), !lost {
            findings.strayInitiationEnded = await endStrayInitiation() == .ended
        }
        return findings
    }
}
