"""JUnit XML: one testsuite per run; a testcase for the run's validity, one for its completion (not
interrupted by a signal), one per target (it had successful requests and a failure ratio within the
error_rate SLO) and one per target x SLO. An SLO on a flagged figure that could not be judged is an
``<error type="inconclusive">`` (the test could not be run), never a pass. The run's verdict line and
exit code are suite properties."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from llmload.report.flagged import ADVICE
from llmload.report.model import Report, build_report
from llmload.report.slo import SloResult, fmt


def _case(
    suite: ET.Element,
    classname: str,
    name: str,
    failure: str | None,
    kind: str,
    out: str = "",
    element: str = "failure",
) -> bool:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
    if failure is not None:
        f = ET.SubElement(case, element, message=failure, type=kind)
        f.text = failure
    if out:
        ET.SubElement(case, "system-out").text = out
    return failure is not None


def _properties(suite: ET.Element, rep: Report) -> None:
    """The run's scenario, status and mode as suite properties (those that are set)."""
    run = rep.run.run
    props = ET.SubElement(suite, "properties")
    for k, v in (
        ("scenario_name", run.scenario_name),
        ("scenario_file", run.scenario_file),
        ("status", run.status),
        ("mode", run.mode),
        ("verdict", run.verdict),
        ("exit_code", None if run.exit_code is None else str(run.exit_code)),
    ):
        if v is not None:
            ET.SubElement(props, "property", name=k, value=v)
    for target, sim in rep.simulated.items():
        ET.SubElement(props, "property", name=f"simulated.{target}", value=sim.label)


def _slo_case(suite: ET.Element, classname: str, r: SloResult) -> tuple[bool, bool]:
    """One target x SLO testcase, failed with the measured value and threshold when it missed, an
    error when it rests on a flagged figure (inconclusive). Returns (failed, errored)."""
    unit = f" {r.unit}" if r.unit else ""
    name = f"slo {r.slo} {r.comparator} {fmt(r.threshold)}{unit}"
    measured = "not measured" if r.measured is None else f"measured {fmt(r.measured)}{unit}"
    if r.inconclusive:
        why = f"{r.slo}: inconclusive, {' and '.join(r.flagged)} flagged ({measured}): {ADVICE}"
        return False, _case(suite, classname, name, why, "inconclusive", element="error")
    msg = None if r.passed else f"{r.slo}: {measured}, threshold {r.comparator} {fmt(r.threshold)}{unit}"
    return _case(suite, classname, name, msg, "slo"), False


def render_junit_report(rep: Report) -> str:
    run = rep.run.run
    rid = rep.run.run_id
    root = ET.Element("testsuites", name="llmload")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=f"llmload.{rid}",
        timestamp=run.started_at,
        time=str(run.duration_s or 0),
    )
    _properties(suite, rep)
    failures = errors = tests = 0
    reasons = "\n".join(run.reasons)
    invalid = f"run status is invalid: {'; '.join(run.reasons) or 'no reason given'}"
    failures += _case(
        suite,
        f"llmload.{rid}",
        "run is valid",
        invalid if rep.run.status == "invalid" else None,
        "invalid_run",
        reasons,
    )
    tests += 1
    stop = run.stop_reason
    interrupted = f"run interrupted by {stop}: figures cover the run up to the stop" if stop else ""
    failures += _case(
        suite,
        f"llmload.{rid}",
        "run completed",
        interrupted if rep.run.status == "interrupted" else None,
        "interrupted",
    )
    tests += 1
    for target in rep.run.targets:
        cls = f"llmload.{rid}.{target}"
        failures += _case(suite, cls, "requests succeeded", rep.target_health(target), "requests")
        tests += 1
        for r in (x for x in rep.slo_results if x.target == target):
            failed, errored = _slo_case(suite, cls, r)
            failures += failed
            errors += errored
            tests += 1
    for el in (root, suite):
        el.set("tests", str(tests))
        el.set("failures", str(failures))
        el.set("errors", str(errors))
    suite.set("skipped", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render_junit(results_dir: Path | str) -> str:
    """JUnit XML for a results directory."""
    return render_junit_report(build_report(results_dir))
