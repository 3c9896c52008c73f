import Waits

/// LEHost's GAP procedures, one at a time in order of submission, as Linux runs them on one
/// worker (`hci_cmd_sync_queue`): a procedure sends its commands and awaits their completions (and,
/// for a connection attempt, the attempt's end) before the next one starts, so that no await
/// inside it lets another procedure's commands in between. An urgent procedure (an address change)
/// goes before those still waiting, never before the one running.
///
/// A ticket is taken when the procedure is submitted, so that a request made on the event path
/// keeps its place although its task starts later. Cancelling the task of a waiting procedure
/// takes it out of the queue; a running one is never interrupted here (its owner decides what
/// cleanup it still owes the controller). All of this is the kit's FIFO lock.
typealias ProcedureQueue = FIFOLock
