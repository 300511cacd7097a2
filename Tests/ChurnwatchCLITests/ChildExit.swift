import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waits for a child process's exit without `Process.waitUntilExit`, and without polling.
///
/// Foundation on Linux learns of an exit through a socket the child holds; a process another test
/// spawned at the same moment can inherit it, and then `waitUntilExit` spins until that other
/// process ends too (swift-corelibs-foundation#4795; a CI run hung 20 minutes that way). The
/// kernel knows better: `waitid(…, WNOWAIT)` blocks until the child has exited and reads its
/// status while leaving it for Foundation to reap. Call from a thread of its own: it blocks.
enum ChildExit {
    /// The exit status, or the number of the signal that ended it (as `Process.terminationStatus`
    /// gives it).
    static func status(of process: Process) -> Int32 { wait(for: process).status }

    /// The status and whether a signal ended the process.
    static func wait(for process: Process) -> (status: Int32, bySignal: Bool) {
        if let exit = wait(pid: process.processIdentifier) { return exit }
        // Foundation reaped it first (ECHILD): then it has, or is about to have, the status.
        while process.isRunning { usleep(1_000) }  // polling Foundation's bookkeeping, not a result
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    /// `wait(for:)`, killing the process (SIGKILL) if it has not ended `seconds` from now.
    static func wait(for process: Process, killingAfter seconds: TimeInterval) -> (status: Int32, bySignal: Bool) {
        let pid = process.processIdentifier
        let kill9 = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: kill9)
        defer { kill9.cancel() }
        return wait(for: process)
    }

    /// The exit of child `pid` once it has ended; nil when it was already reaped (or is no child).
    static func wait(pid: Int32) -> (status: Int32, bySignal: Bool)? {
        #if canImport(Glibc)
        var info = siginfo_t()
        while true {
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == 0 {
                // si_status: the exit code for CLD_EXITED, the signal for CLD_KILLED/CLD_DUMPED.
                return (info._sifields._sigchld.si_status, info.si_code != CLD_EXITED)
            }
            if errno != EINTR { return nil }
        }
        #else
        return nil
        #endif
    }
}
