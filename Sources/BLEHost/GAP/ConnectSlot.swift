/// The controller's one initiating state, as a queue: whoever holds the slot may send LE Create
/// Connection, and gives the slot back only once the controller has ended that attempt. Waiters are
/// served in arrival order, except an urgent one (an address change), which goes first.
/// Used only inside its owner's actor.
struct ConnectSlot {
    private var taken = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Takes the slot if it is free, without waiting.
    mutating func tryTake() -> Bool {
        guard !taken else { return false }
        taken = true
        return true
    }

    /// Queues a waiter for a taken slot; an urgent one goes first.
    mutating func enqueue(_ waiter: CheckedContinuation<Void, Never>, urgent: Bool) {
        if urgent { waiters.insert(waiter, at: 0) } else { waiters.append(waiter) }
    }

    /// Hands the slot to the next waiter, or frees it.
    mutating func release() {
        if waiters.isEmpty {
            taken = false
        } else {
            waiters.removeFirst().resume()
        }
    }

    /// Wakes everyone (the controller is gone; each waiter then finds that out).
    mutating func releaseAll() {
        for waiter in waiters { waiter.resume() }
        waiters = []
        taken = false
    }
}
