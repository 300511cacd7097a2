import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waits for a child process's exit without `Process.waitUntilExit`.
///
/// Foundation on Linux learns of an exit through a socket the child holds; a process another test
/// spawned at the same moment can inherit it, and then `waitUntilExit` spins until that other
/// process ends too (swift-corelibs-foundation#4795; a CI run hung 20 minutes that way). The
/// kernel knows better: `waitid(…, WNOWAIT)` blocks until the child has exited and reads its
/// status while leaving it for Foundation to reap.
enum ChildExit {
    /// The exit status, or the number of the signal that ended it (as `Process.terminationStatus`
    /// gives it). Call from a thread of its own: it blocks.
    static func status(of process: Process) -> Int32 { wait(for: process).status }

    static func wait(for process: Process) -> (status: Int32, bySignal: Bool) {
        #if canImport(Glibc)
        var info = siginfo_t()
        while true {
            if waitid(P_PID, id_t(process.processIdentifier), &info, WEXITED | WNOWAIT) == 0 {
                // si_status: the exit code for CLD_EXITED, the signal for CLD_KILLED/CLD_DUMPED.
                return (info._sifields._sigchld.si_status, info.si_code != CLD_EXITED)
            }
            if errno != EINTR { break }
        }
        #endif
        // Foundation reaped it first (ECHILD): then it has, or is about to have, the status.
        while process.isRunning { usleep(1_000) }  // polling Foundation's bookkeeping, not a result
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }
}
