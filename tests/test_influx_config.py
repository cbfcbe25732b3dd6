"""InfluxConfig: API inference, URL parameters, option overrides, secrets, and the replay CLI's bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import ValidationError

from llmload.config.influx_config import InfluxConfig, add_influx_arguments, influx_config_from_args
from llmload.sinks import influx_cli
from llmload.sinks.influx_write import InfluxWriter


def _ns(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_influx_arguments(parser)
    return parser.parse_args(list(argv))


def test_api_is_inferred_from_database_or_bucket() -> None:
    assert InfluxConfig(url="http://h:8086").api == "v1"
    assert InfluxConfig(url="http://h:8086").database == "llmload"
    assert InfluxConfig(url="http://h:8086", org="o", bucket="b").api == "v2"
    assert InfluxConfig(url="http://h:8086", database="d", bucket="b").api == "v1"
    with pytest.raises(ValidationError, match="bucket"):
        InfluxConfig(url="http://h:8086", api="v2")
    with pytest.raises(ValidationError, match="extra"):
        InfluxConfig.model_validate({"url": "http://h:8086", "tokn": "x"})
    with pytest.raises(ValidationError, match="url"):
        InfluxConfig(url="h:8086")


def test_no_influx_without_url_or_scenario() -> None:
    assert influx_config_from_args(_ns()) is None


def test_url_parameters_select_the_api_and_options_override() -> None:
    v1 = influx_config_from_args(_ns("--influx", "http://h:8086?db=runs"))
    assert v1 is not None and (v1.url, v1.api, v1.database) == ("http://h:8086", "v1", "runs")
    v2 = influx_config_from_args(
        _ns("--influx", "http://h:8086/?org=o&bucket=b", "--influx-batch-size", "10")
    )
    assert v2 is not None and (v2.api, v2.org, v2.bucket, v2.batch_size) == ("v2", "o", "b", 10)
    base = InfluxConfig(url="http://scenario:8086", database="from_scenario", max_retries=7)
    merged = influx_config_from_args(_ns("--influx", "http://cli:8086", "--influx-timeout", "2"), base)
    assert merged is not None
    assert (merged.url, merged.database, merged.max_retries, merged.timeout_s) == (
        "http://cli:8086",
        "from_scenario",
        7,
        2.0,
    )
    only_base = influx_config_from_args(_ns(), base)
    assert only_base is not None and only_base.url == "http://scenario:8086"


def test_secrets_come_from_the_environment_and_never_show(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", "s3cret-token")
    cfg = InfluxConfig(url="http://h:8086", org="o", bucket="b", token_env="MY_TOKEN")
    assert cfg.token() == "s3cret-token"
    assert "s3cret" not in repr(cfg) and "s3cret" not in str(cfg.describe())
    writer = InfluxWriter(cfg)
    assert writer._headers()["Authorization"] == "Token s3cret-token"
    assert writer.path == "/api/v2/write?bucket=b&precision=ns&org=o"
    monkeypatch.delenv("MY_TOKEN")
    monkeypatch.setenv("INFLUX_PASSWORD", "pw")
    v1 = InfluxWriter(InfluxConfig(url="http://h:8086/", database="d b", username="u", token_env="MY_TOKEN"))
    assert v1._headers()["Authorization"] == "Basic dTpwdw=="  # base64("u:pw")
    assert v1.path == "/write?db=d+b&precision=ns"


def test_replay_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert influx_cli.main(["replay", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such directory" in err[0]

    spool = tmp_path / "influx-spool"
    spool.mkdir()
    (spool / "r-local-1-000001.lp").write_text("m f=1.0 1\n")
    assert influx_cli.main(["replay", str(tmp_path)]) == 2  # no target.json and no --influx
    err = capsys.readouterr().err
    assert "--influx" in err and "Traceback" not in err

    assert influx_cli.main(["replay", str(tmp_path), "--influx", "ftp://x"]) == 2
    assert "url" in capsys.readouterr().err
    assert influx_cli.main(["replay", str(tmp_path), "--influx-api", "v3"]) == 2

    empty = tmp_path / "empty"
    empty.mkdir()
    assert influx_cli.main(["replay", str(empty)]) == 0
    assert "nothing to replay" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("[1]", "target.json: expected a JSON object"),
        ('{"url": "http://127.0.0.1:9", "api": "v9"}', "target.json: api: Input should be 'v1' or 'v2'"),
    ],
)
def test_a_spool_whose_target_json_is_wrong_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, said: str
) -> None:
    """target.json that exists but says no destination is that file's fault, not a missing file's
    or the options'."""
    spool = tmp_path / "influx-spool"
    spool.mkdir()
    (spool / "r-local-1-000001.lp").write_text("m f=1.0 1\n")
    (spool / "target.json").write_text(target)
    assert influx_cli.main(["replay", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
