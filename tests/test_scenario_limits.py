"""Values a scenario's types take but a run cannot: each is one line naming file, line and field, exit 2.

An integer too long for Python to read, a base_url the client cannot send to, a warm-up as long as
the load (or a load of 0 s), a boolean read as a number, a uniform length without its range, a
negative temperature: each used to pass ``llmload validate`` (or end it in a traceback).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import llmload.config
from llmload.base.strict import Strict
from llmload.config.scenario import load_scenario
from llmload.config.spec import Spec
from llmload.config.yamlsrc import InputError, json_value, jsonl_objects
from tests.cli_inprocess import call_cli
from tests.test_scenario import GOOD, write

NINES = "9" * 5000  # Python reads at most 4,300 digits (sys.get_int_max_str_digits)


def refused(tmp_path: Path, text: str, where: str, words: str, sets: tuple[str, ...] = ()) -> None:
    """``llmload validate`` of ``text`` is exit 2 with one line that starts ``where`` (FILE:LINE: field,
    or --set field) and holds ``words``."""
    p = write(tmp_path, text)
    r = call_cli(["validate", str(p), *[x for s in sets for x in ("--set", s)]], cwd=tmp_path)
    assert r.code == 2, r.out + r.err
    assert "Traceback" not in r.err
    [line] = r.err_lines
    assert line.startswith(f"llmload: {where.replace('FILE', str(p))}"), line
    assert words in line, line


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (("  users: 4\n", f"  users: {NINES}\n"), "FILE:13: load.users: "),
        (
            ("    model: m\n", f"    model: m\n    cost_per_hour: {NINES}\n"),
            "FILE:7: targets[0].cost_per_hour: ",
        ),
        (("  warmup: 5s\n", f"  warmup: 0x{'f' * 5000}\n"), "FILE:15: load.warmup: "),  # reads; no decimal
        (("  warmup: 5s\n", f"  ? {NINES}\n  : 1\n"), "FILE:15: load."),  # a key (YAML's long-key form)
    ],
)
def test_an_integer_python_cannot_read_is_one_line(tmp_path: Path, edit: tuple[str, str], where: str) -> None:
    refused(tmp_path, GOOD.replace(*edit), where, "an integer of more than 4,300 digits")


def test_an_integer_python_cannot_read_from_set_names_the_option(tmp_path: Path) -> None:
    refused(
        tmp_path, GOOD, "--set load.users: ", "an integer of more than 4,300 digits", (f"load.users={NINES}",)
    )
    refused(tmp_path, GOOD, "--set load: ", "more than 4,300 digits", (f"load={{users: [{NINES}]}}",))


def test_a_json_number_python_cannot_read_names_its_line(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    with pytest.raises(InputError, match=rf"^{p}:2: a number of more than 4,300 digits$"):
        list(jsonl_objects(f'{{"prompt": "a"}}\n{{"output_tokens": {NINES}}}\n', p))
    with pytest.raises(InputError, match=rf"^{p}:1: a number of more than 4,300 digits$"):
        json_value(NINES, p)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:abc", "its port must be a number from 1 to 65535, got 'abc'"),
        ("http://127.0.0.1:99999", "its port must be a number from 1 to 65535, got '99999'"),
        ("http://127.0.0.1:0", "its port must be a number from 1 to 65535, got '0'"),
        ("http://[::1", "not a URL: Invalid IPv6 URL"),
        ("http://:8000", "names no host"),
        ("ftp://127.0.0.1:8000", "base_url must start with http:// or https://"),
    ],
)
def test_a_base_url_the_client_cannot_use_is_refused(tmp_path: Path, url: str, words: str) -> None:
    text = GOOD.replace("http://127.0.0.1:8000", url)
    refused(tmp_path, text, "FILE:5: targets[0].base_url: ", words)
    refused(tmp_path, GOOD, f"--set targets[0].base_url='{url}': ", words, (f"targets.a.base_url={url}",))


def test_a_base_url_the_client_can_use_validates(tmp_path: Path) -> None:
    for url in ("http://[::1]:8000/v1", "https://user:pw@host.example:65535", "http://h"):
        sc = load_scenario(write(tmp_path, GOOD.replace("http://127.0.0.1:8000", url)))
        assert sc.targets[0].base_url == url


@pytest.mark.parametrize(
    ("load", "line", "words"),
    [
        (
            "  users: 4\n  duration: 3s\n  warmup: 10s\n",
            15,
            "(10 s) must be shorter than the load's duration (3 s)",
        ),
        (
            "  users: 4\n  duration: 5s\n  warmup: 5s\n",
            15,
            "(5 s) must be shorter than the load's duration (5 s)",
        ),
        (
            "  warmup: 1m\n  phases:\n"
            "    - {executor: ramping-vus, stages: [{duration: 20s, target: 4}, {duration: 0s, target: 8}]}\n"
            "    - {executor: constant-arrival-rate, rate: 2, duration: 40s}\n",
            13,
            "(60 s) must be shorter than the load's duration (60 s)",
        ),
        (
            "  warmup: 30s\n  phases:\n    - {executor: sweep, levels: [1, 2], hold: 10s, settle: 5s}\n",
            13,
            "(30 s) must be shorter than the load's duration (25 s)",
        ),
        (
            "  warmup: 10s\n  phases:\n    - {executor: sweep, levels: [1, 2, 4], hold: 10s}\n",
            13,
            "(10 s) must be shorter than the sweep's hold (10 s): its first level would measure nothing",
        ),
    ],
)
def test_a_warmup_as_long_as_the_load_is_refused(tmp_path: Path, load: str, line: int, words: str) -> None:
    text = GOOD.split("\nload:\n")[0] + "\nload:\n" + load
    refused(tmp_path, text, f"FILE:{line}: load.warmup: ", words)


def test_a_warmup_shorter_than_the_load_or_before_a_count_validates(tmp_path: Path) -> None:
    head = GOOD.split("\nload:\n")[0] + "\nload:\n"
    for load in (
        "  users: 4\n  duration: 11s\n  warmup: 10s\n",
        "  users: 4\n  max_requests: 10\n  warmup: 10m\n",  # ends on a count: its length is not known
        "  warmup: 1h\n  phases: [{executor: sweep, levels: [1], requests: 5}]\n",
        "  warmup: 1h\n  phases: [{executor: capacity}]\nslo: {ttft_p99_ms: 100}\n",  # each probe adds it
    ):
        load_scenario(write(tmp_path, head + load))


@pytest.mark.parametrize(
    ("load", "where", "words", "sets"),
    [
        ("  users: 4\n  duration: 0s\n", "FILE:14: load.duration: ", "greater than 0", ()),
        ("  users: 4\n", "--set load.duration='0s': ", "greater than 0", ("load.duration=0s",)),
        (
            "  phases: [{executor: constant-vus, vus: 1, duration: 0}]\n",
            "FILE:13: load.phases[0].duration: ",
            "",
            (),
        ),
        (
            "  phases: [{executor: constant-arrival-rate, rate: 1, duration: 0s}]\n",
            "FILE:13: load.phases[0].duration: ",
            "",
            (),
        ),
        ("  phases: [{executor: sweep, levels: [1], hold: 0s}]\n", "FILE:13: load.phases[0].hold: ", "", ()),
        ("  phases: [{executor: capacity, hold_max: 0s}]\n", "FILE:13: load.phases[0].hold_max: ", "", ()),
        (
            "  phases: [{executor: ramping-vus, stages: [{duration: 0s, target: 4}]}]\n",
            "FILE:13: load.phases[0]: ",
            "the stages last 0 s in all",
            (),
        ),
    ],
)
def test_a_load_of_0_s_is_refused(
    tmp_path: Path, load: str, where: str, words: str, sets: tuple[str, ...]
) -> None:
    text = GOOD.split("\nload:\n")[0] + "\nload:\n" + load + "slo: {ttft_p99_ms: 100}\n"
    refused(tmp_path, text, where, words, sets)


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (("  users: 4\n", "  users: true\n"), "FILE:13: load.users: "),
        (("  input_tokens: 64\n", "  input_tokens: true\n"), "FILE:10: workload.input_tokens: "),
        (("max: 20}", "max: false}"), "FILE:11: workload.output_tokens.max: "),
        (("  input_tokens: 64\n", "  input_tokens: 64\n  seed: false\n"), "FILE:11: workload.seed: "),
        (
            ("  input_tokens: 64\n", "  input_tokens: 64\n  temperature: true\n"),
            "FILE:11: workload.temperature: ",
        ),
        (("    model: m\n", "    model: m\n    cost_per_hour: true\n"), "FILE:7: targets[0].cost_per_hour: "),
        (("  warmup: 5s\n", "  warmup: true\n"), "FILE:15: load.warmup: "),
        (
            ("  users: 4\n  duration: 2m\n", "  phases: [{executor: sweep, levels: [1, true], hold: 1m}]\n"),
            "FILE:13: load.phases[0].levels: ",
        ),
    ],
)
def test_a_boolean_is_no_number(tmp_path: Path, edit: tuple[str, str], where: str) -> None:
    word = "false" if "false" in edit[1] else "true"
    refused(tmp_path, GOOD.replace(*edit), where, f"expected a number, got {word}")


@pytest.mark.parametrize(
    ("edit", "where", "got"),
    [
        (
            ("  input_tokens: 64\n", "  input_tokens: 64\n  ignore_eos: 1\n"),
            "FILE:11: workload.ignore_eos: ",
            "1",
        ),
        (
            ("  warmup: 5s\n", "  warmup: 5s\n  stop_on_slo_miss: 'no'\n"),
            "FILE:16: load.stop_on_slo_miss: ",
            "'no'",
        ),
    ],
)
def test_a_yes_or_no_is_true_or_false(tmp_path: Path, edit: tuple[str, str], where: str, got: str) -> None:
    # pydantic's lax mode read 1 and "no" as booleans: ignore_eos: 1 was true
    refused(tmp_path, GOOD.replace(*edit), where, f"expected true or false, got {got}")


def test_a_boolean_from_set_is_no_number(tmp_path: Path) -> None:
    refused(tmp_path, GOOD, "--set load.users=True: ", "expected a number, got true", ("load.users=true",))


def test_scrape_interval_off_is_a_word_and_on_no_interval(tmp_path: Path) -> None:
    """client.scrape_interval reads YAML's off (false) itself; its on (true) was a scrape every 1 s."""
    sc = load_scenario(write(tmp_path, GOOD + "client: {scrape_interval: off}\n"))
    assert sc.client.scrape_interval is None
    text = GOOD + "client:\n  scrape_interval: on\n"
    refused(tmp_path, text, "FILE:17: client.scrape_interval: ", "expected an interval such as 5s, or off")


def test_every_scenario_model_refuses_booleans_for_numbers() -> None:
    """Spec carries the rule; a model on Strict alone would read ``true`` as 1 again."""
    for info in pkgutil.iter_modules(llmload.config.__path__):
        module = importlib.import_module(f"llmload.config.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Strict) and cls.__module__ == module.__name__:
                assert issubclass(cls, Spec), f"{module.__name__}.{name} is a Strict model, not a Spec"


@pytest.mark.parametrize(
    ("dist", "words"),
    [
        ("{dist: uniform, min: 200}", "dist uniform needs `max`"),
        ("{dist: uniform, max: 200}", "dist uniform needs `min`"),
        ("{dist: uniform}", "dist uniform needs `min`"),
    ],
)
def test_a_uniform_length_needs_min_and_max(tmp_path: Path, dist: str, words: str) -> None:
    refused(
        tmp_path,
        GOOD.replace("  input_tokens: 64\n", f"  input_tokens: {dist}\n"),
        "FILE:10: workload.input_tokens: ",
        words,
    )


def test_a_negative_temperature_is_refused(tmp_path: Path) -> None:
    text = GOOD.replace("  input_tokens: 64\n", "  input_tokens: 64\n  temperature: -1\n")
    refused(tmp_path, text, "FILE:11: workload.temperature: ", "greater than or equal to 0")
    refused(
        tmp_path,
        GOOD,
        "--set workload.temperature=-0.5: ",
        "greater than or equal to 0",
        ("workload.temperature=-0.5",),
    )


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            ("  input_tokens: 64\n", "  kind: trace\n  path: x.jsonl\n  input_tokens: 64\n"),
            "a trace workload is replayed by trace phases only",
        ),
        (
            (
                "  users: 4\n  duration: 2m\n",
                "  phases:\n    - {executor: capacity}\n    - {executor: constant-vus, vus: 1, duration: 1m}\n",
            ),
            "a capacity phase is a search of its own",
        ),
    ],
)
def test_a_load_that_does_not_fit_the_scenario_names_the_load_line(
    tmp_path: Path, edit: tuple[str, str], words: str
) -> None:
    """A rule across sections is shown at the load's line, not at line 1 as (top level)."""
    text = GOOD.replace(*edit)
    line = text.splitlines().index("load:") + 1
    refused(tmp_path, text, f"FILE:{line}: load: ", words)


@pytest.mark.parametrize(
    ("dist", "words"),
    [
        ("{dist: fixed, value: 64, mean: 5}", "dist fixed takes no `mean` (it takes max, min, value)"),
        ("{dist: uniform, min: 1, max: 9, sigma: 1}", "dist uniform takes no `sigma`"),
        ("{dist: lognormal, median: 64, mean: 80, sigma: 0.5}", "needs `median` or `mean` (one of them"),
        ("{dist: fixed, value: 500, max: 100}", "dist fixed: value 500 is outside min..max (1..100)"),
        ("{dist: fixed, value: 2000000}", "dist fixed: value 2000000 is outside min..max (1..1000000)"),
    ],
)
def test_a_length_field_its_distribution_would_ignore_is_refused(
    tmp_path: Path, dist: str, words: str
) -> None:
    text = GOOD.replace("  input_tokens: 64\n", f"  input_tokens: {dist}\n")
    refused(tmp_path, text, "FILE:10: workload.input_tokens: ", words)
