"""The "LLM" tab of Locust's web UI: live per-target figures from llmload's own measurements.

Usage: the plugin calls ``register(web_ui, Feeds(rows=...), before_swarm=...)`` from ``events.init``.

- The tab is Locust 2.x's extension mechanism: ``template_args["extendedTabs"]`` /
  ``["extendedTables"]`` / ``["extendedCsvFiles"]``, and an ``extended_stats`` entry added to
  every ``/stats/requests`` answer, so the table refreshes with the rest of the UI.
- The figures come from the Conductor (``Conductor.live_view()``, backed by ``liveview.LiveView``): the
  request lines and interval rows its Aggregator merged (every worker's, in distributed mode),
  never from Locust's rounded statistics.
- ``GET ./llmload/live`` answers the rows as JSON, ``GET ./llmload/live.csv`` as CSV,
  ``GET ./llmload/status`` the run's id, state, step, elapsed time, verdict and results directory,
  and ``GET ./llmload/series`` all the tab draws from one moment: the status, the charts' bounded
  time series per target (livecharts.py) with their colours (report/palette.py) and the table's
  rows. The page polls it every 2 s for as long as it is open and draws it with livetab.js and
  livecharts.js (its own table: Locust's page stops polling when its header turns STOPPED).
- ``GET ./llmload/plan?scenario=&targets=&set=`` describes the form's scenario in words
  (load/planwords.py); livetab.js shows it in place of Locust's users and ramp-up fields.
- ``before_swarm`` runs before Locust's ``POST /swarm`` handler, so a scenario chosen in the
  start form is loaded (user classes and shape in place) before Locust spawns anything.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from flask import Blueprint, Flask

from llmload.locust.liveview import COLUMNS, display_rows, to_csv
from llmload.measure.livewindow import WINDOW_S

F = TypeVar("F", bound=Callable[..., Any])
Handler = Callable[..., Any]  # a Flask view

TAB_KEY = "llm"
# The start form: Locust's fields the scenario decides (hidden; the plan is shown in their place),
# and llmload's options in plain words (Locust titles them from their dests: "Llm Set"). The names
# are the form's (camelCase; Locust turns them back into the dests).
FORM_HIDE = ("userCount", "spawnRate", "runTime")
FORM_LABELS = {
    "scenario": "Scenario file (YAML)",
    "llmTargets": "Targets to run (comma-separated; empty: all of the scenario's)",
    "llmSet": "Scenario overrides (key.path=value, comma-separated)",
    "llmResults": "Results directory (empty: the scenario's output.dir / run id)",
    "allowWorkerLoss": "A lost worker degrades the run but still exits 0",
    "llmNoReports": "Skip the HTML, Markdown and JUnit reports",
}
FORM_SECTION = "llmload options"
CAPTION = (
    f"llmload's exact figures per target. While a test runs: output tok/s from tokens as they streamed, "
    f"over the last {WINDOW_S:g} s; TTFT (at each first token) and ITL (at each request's end) over the last "
    f"{WINDOW_S:g} s of samples (kept while none comes); req/s and TPOT over the requests that ended in the last {WINDOW_S:g} s; "
    "loop lag from the last reporting interval; requests and failures since the start (warm-up included). "
    "Once it stopped: the final figures of summary.json (warm-up excluded)."
)
SCRIPTS = (Path(__file__).with_name("livecharts.js"), Path(__file__).with_name("livetab.js"))


@dataclass(frozen=True)
class Feeds:
    """Where the tab's routes get what they answer (llmload/locust/webui_hooks.py gives them)."""

    rows: Callable[[], list[dict[str, Any]]]  # the table's rows (liveview.py)
    status: Callable[[], dict[str, Any]] | None = None  # the run's status line and state
    series: Callable[[], dict[str, Any]] | None = None  # the charts' points, colours and target order
    plan: Callable[[dict[str, str]], dict[str, Any]] | None = None  # the start form's plan in words


def register(
    web_ui: Any,
    feeds: Feeds,
    before_swarm: Callable[[dict[str, str]], str | None] | None = None,
) -> None:
    """Add the LLM tab, its JSON/CSV routes and the start-form hook to Locust's web UI."""
    from flask import Blueprint

    web_ui.template_args["extendedTabs"] = [{"title": "LLM", "key": TAB_KEY}]
    web_ui.template_args["extendedTables"] = [
        {"key": TAB_KEY, "structure": [{"key": k, "title": title} for k, title in COLUMNS]}
    ]
    web_ui.template_args["extendedCsvFiles"] = [
        {"href": "./llmload/live.csv", "title": "Download LLM table CSV"}
    ]
    opts = web_ui.environment.parsed_options
    prefix = (getattr(opts, "web_base_path", "") or "") if opts is not None else ""
    bp = Blueprint("llmload", __name__, url_prefix=prefix or None)
    auth: Callable[[F], F] = web_ui.auth_required_if_enabled
    app: Flask = web_ui.app
    _add_routes(bp, auth, feeds)
    app.register_blueprint(bp)
    _require_password(app)
    _add_hooks(app, web_ui, feeds.rows, before_swarm)


def _add_routes(bp: Blueprint, auth: Callable[[Handler], Handler], feeds: Feeds) -> None:
    """The tab's JSON, CSV and script routes."""
    from flask import Response, jsonify, make_response, request

    rows, status, series, plan = feeds.rows, feeds.status, feeds.series, feeds.plan

    @bp.route("/llmload/live")
    @auth
    def live() -> Response:
        return jsonify({"columns": [{"key": k, "title": t} for k, t in COLUMNS], "rows": rows()})

    @bp.route("/llmload/status")
    @auth
    def run_status() -> Response:
        """The current (or last) run: its id, state, verdict and results directory, and one line of them."""
        return jsonify(status() if status is not None else {})

    @bp.route("/llmload/series")
    @auth
    def live_series() -> Response:
        """Everything the tab draws, from one moment: the run's status, the charts' points per target
        (livecharts.py) and the table's rows, so they never disagree (all final once it stopped)."""
        data = series() if series is not None else {"fields": [], "targets": {}}
        columns = [{"key": k, "title": t} for k, t in COLUMNS]
        table = {"columns": columns, "rows": display_rows(rows())}
        return jsonify({"status": status() if status is not None else {}, **data, **table})

    @bp.route("/llmload/plan")
    @auth
    def form_plan() -> Response:
        """The start form's plan: the scenario it names, in words (or the one line saying what is wrong)."""
        args = {k: request.args.get(k, "") for k in ("scenario", "targets", "set")}
        return jsonify(plan(args) if plan is not None else {"lines": []})

    @bp.route("/llmload/live.csv")
    @auth
    def live_csv() -> Response:
        resp = make_response(to_csv(rows()))
        resp.headers["Content-Type"] = "text/csv"
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        resp.headers["Content-Disposition"] = f"attachment;filename=llmload_live_{stamp}.csv"
        return resp

    @bp.route("/llmload/tab.js")
    @auth
    def tab_js() -> Response:
        cfg = {
            "key": TAB_KEY,
            "caption": CAPTION,
            "labels": FORM_LABELS,
            "hide": FORM_HIDE,
            "section": FORM_SECTION,
        }
        head = f"window.llmloadTab = {json.dumps(cfg)};\n"
        resp = make_response(head + "".join(p.read_text(encoding="utf-8") for p in SCRIPTS))
        resp.headers["Content-Type"] = "application/javascript"
        return resp


def _add_hooks(
    app: Flask,
    web_ui: Any,
    rows: Callable[[], list[dict[str, Any]]],
    before_swarm: Callable[[dict[str, str]], str | None] | None,
) -> None:
    """Locust's stats JSON gets the tab's rows, its page the tab's script; Start goes through ``before_swarm``."""
    from flask import Response, jsonify, request

    @app.after_request
    def _extend(response: Response) -> Response:
        if request.endpoint == "locust.request_stats" and response.is_json:
            data = response.get_json()
            data["extended_stats"] = [{"key": TAB_KEY, "data": display_rows(rows())}]
            response.set_data(jsonify(data).get_data())
        elif request.endpoint == "locust.index" and response.status_code == 200:
            html = response.get_data(as_text=True)
            tag = '<script src="./llmload/tab.js"></script>'
            response.set_data(html.replace("</body>", tag + "</body>", 1))
        return response

    @app.before_request
    def _swarm() -> Response | None:
        if request.endpoint != "locust.swarm" or request.method != "POST":
            return None
        if web_ui.web_login and not _logged_in():
            return None  # Locust's own handler answers with its login check
        _take_list_options(request, web_ui.environment.parsed_options)
        if before_swarm is None:
            return None
        err = before_swarm({k: v for k, v in request.form.items()})
        if err is None:
            return None
        return jsonify({"success": False, "message": err, "host": web_ui.environment.host})


def _require_password(app: Flask) -> None:
    """HTTP basic auth on every page and endpoint when LLMLOAD_WEB_PASSWORD is set (user:
    LLMLOAD_WEB_USER, default "llmload"). For shared hosts; the password never leaves the
    environment (not logged, not in results)."""
    import hmac

    from flask import Response, request

    password = os.environ.get("LLMLOAD_WEB_PASSWORD", "")
    if not password:
        return
    user = os.environ.get("LLMLOAD_WEB_USER", "llmload")

    @app.before_request
    def _check() -> Response | None:
        auth = request.authorization
        if (
            auth is not None
            and hmac.compare_digest((auth.username or "").encode(), user.encode())
            and hmac.compare_digest((auth.password or "").encode(), password.encode())
        ):
            return None
        return Response(
            "llmload: login required\n", 401, {"WWW-Authenticate": 'Basic realm="llmload", charset="UTF-8"'}
        )


def split_list_value(value: str) -> list[str]:
    """A list option typed in the form: comma-separated, but a comma inside a key=value stays."""
    parts = re.split(r",(?=\s*[A-Za-z_][\w.\-]*=)", value) if "=" in value else value.split(",")
    return [x.strip() for x in parts if x.strip()]


def _take_list_options(request: Any, opts: Any) -> None:
    """Set list options (``--set``) from the form ourselves and hide them from Locust's handler.

    Locust 2.47 converts a list option whose current value is empty to a list of ints, which
    fails on any text (and on an empty field), and splits every comma.
    """
    from werkzeug.datastructures import ImmutableMultiDict

    if opts is None:
        return
    keys = {k for k in request.form if isinstance(getattr(opts, k, None), list)}
    if not keys:
        return
    for k in keys:
        setattr(opts, k, [x for v in request.form.getlist(k) for x in split_list_value(v)])
    request.form = ImmutableMultiDict([(k, v) for k, v in request.form.items(multi=True) if k not in keys])


def _logged_in() -> bool:
    try:
        from flask_login import current_user

        return bool(current_user.is_authenticated)
    except Exception:  # noqa: BLE001 - no login manager: treat as not logged in
        return False
