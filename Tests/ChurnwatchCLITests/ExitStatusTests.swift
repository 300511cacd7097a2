import ChurnInput
@testable import churnwatch
import Testing

/// Errors a user can cause end in one line and the exit code of their kind.
@Suite struct ExitStatusTests {
    @Test func anUnreadableInputFileIsADataErrorNotABug() {
        let (line, code) = classify(ImportFileError("cannot read the input file: Input/output error; check the file and the disk"))
        #expect(code == ExitStatus.dataError && code == 65)
        #expect(line == "cannot read the input file: Input/output error; check the file and the disk")
    }
}
