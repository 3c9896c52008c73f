import Waits

/// The kit's one-shot signal, under the name LEHost uses for the loss of the controller.
typealias OnceSignal<Value: Sendable> = Waits.OnceSignal<Value>
