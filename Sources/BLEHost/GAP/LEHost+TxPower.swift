extension LEHost {
    /// The controller's legacy advertising TX power in dBm, or nil when it does not answer with
    /// one (an unsupported command, or a value outside the specification's -127 to 20 dBm).
    /// Asked once at start-up: the controller's power does not change while it runs. A procedure
    /// of its own, so that its command cannot interleave with another procedure's.
    public func readAdvertisingTxPower() async -> Int8? {
        let power = try? await procedure { () async throws(GAPError) -> Int8? in
            do {
                let answer = try await self.hci.send(LEReadAdvertisingPhysicalChannelTxPower())
                guard answer.txPowerLevel <= 20 else { return nil }
                return answer.txPowerLevel
            } catch {
                self.logger.info(
                    "the controller did not tell its advertising TX power; peers will use what the node advertises by default",
                    metadata: ["error": "\(error)"])
                return nil
            }
        }
        return power ?? nil
    }
}
