import IDRotation
import Logging

/// The controller's advertising TX power, learned by `tracer run` at start-up and kept in the
/// store, so that `tracer check` (another process) can measure the reverse direction of a
/// contact from it: our TX power minus the RSSI the peer reported for us.
extension NodeStore {
    public static let advertisingTxPowerKey = "radio.advertising_tx_power"

    /// Keeps `txPower`; nil (the controller did not tell) forgets an older value, since it may
    /// have come from another adapter.
    public func recordAdvertisingTxPower(_ txPower: Int8?, logger: Logger) {
        do {
            try setStateValue(txPower.map { String($0) }, forKey: Self.advertisingTxPowerKey)
        } catch {
            logger.warning("could not keep the controller's TX power; exposure checks use the peer's instead", metadata: ["error": "\(error)"])
        }
    }

    /// The TX power the last `tracer run` learned, in dBm; nil when none is known.
    public func advertisingTxPower() -> Int? {
        (try? stateValue(forKey: Self.advertisingTxPowerKey)).flatMap { $0 }.flatMap { Int($0) }
    }
}
