"""Run unittest cases and print one line per test, as tests/run.sh counts them:
PASS: name / FAIL: name: why / SKIP: name: reason. A test may also print its own
"SKIP: ..." line for a part it could not check."""
import sys
import unittest


class LineResult(unittest.TestResult):
    def __init__(self, prefix, stream=sys.stdout):
        super().__init__()
        self.prefix, self.out = prefix, stream

    def _name(self, test):
        return "%s %s.%s" % (self.prefix, type(test).__name__, test._testMethodName)

    def _say(self, line):
        self.out.write(line + "\n")
        self.out.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._say("PASS: " + self._name(test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._say("FAIL: %s: %s" % (self._name(test), str(err[1]).splitlines()[0] if str(err[1]) else err[0].__name__))
        sys.stderr.write(self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._say("FAIL: %s: %s: %s" % (self._name(test), err[0].__name__, str(err[1]).splitlines()[0] if str(err[1]) else ""))
        sys.stderr.write(self._exc_info_to_string(err, test))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:  # a failed subTest: the test then reports neither success nor failure itself
            self._say("FAIL: %s %s: %s" % (self._name(test), subtest._subDescription(), str(err[1]).splitlines()[0] if str(err[1]) else err[0].__name__))
            sys.stderr.write(self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._say("SKIP: %s: %s" % (self._name(test), reason.replace("SKIP: ", "")))

    def addExpectedFailure(self, test, err):
        self.addFailure(test, err)

    def addUnexpectedSuccess(self, test):
        self._say("FAIL: %s: unexpected success" % self._name(test))


def main(module, prefix):
    """Run every TestCase of module; exit status 1 if anything failed."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = LineResult(prefix)
    suite.run(result)
    sys.exit(0 if result.wasSuccessful() else 1)
