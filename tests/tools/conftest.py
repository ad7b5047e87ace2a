"""pytest setup for the tools' tests: a module skipped whole (matplotlib
missing) leaves no test run, which ctest should see as skipped (77) with
the reason printed, not as a failure."""

import pytest


def pytest_sessionfinish(session, exitstatus):
    if exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for report in (reporter.stats.get("skipped", []) if reporter else []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        print(f"\nskipped: {reason.removeprefix('Skipped: ')}")
    session.exitstatus = 77
