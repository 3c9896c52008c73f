extension LEHost {
    /// The controller's legacy advertising TX power in dBm, or nil when it does not answer with
    /// one (an unsupported command, or a value outside the specification's -127 to 20 dBm).
    /// Asked once at start-up: the controller's power does not change while it runs.
    public func readAdvertisingTxPower() async -> Int8? {
        do {
            let answer = try await hci.send(LEReadAdvertisingPhysicalChannelTxPower())
            guard answer.txPowerLevel <= 20 else { return nil }
            return answer.txPowerLevel
        } catch {
            logger.info("the controller did not tell its advertising TX power; peers will use what the node advertises by default",
                        metadata: ["error": "\(error)"])
            return nil
        }
    }
}
