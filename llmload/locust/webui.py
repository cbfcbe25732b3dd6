"""The "LLM" tab of Locust's web UI: live per-target figures from llmload's own measurements.

Usage: the plugin calls ``register(web_ui, rows=..., before_swarm=...)`` from ``events.init``.

- The tab is Locust 2.x's extension mechanism: ``template_args["extendedTabs"]`` /
  ``["extendedTables"]`` / ``["extendedCsvFiles"]``, and an ``extended_stats`` entry added to
  every ``/stats/requests`` answer, so the table refreshes with the rest of the UI.
- The figures come from the Conductor (``Conductor.live_view()``, backed by ``liveview.LiveView``): the
  request lines and interval rows its Aggregator merged (every worker's, in distributed mode),
  never from Locust's rounded statistics.
- ``GET ./llmload/live`` answers the rows as JSON, ``GET ./llmload/live.csv`` as CSV,
  ``GET ./llmload/status`` the run's id, state, step, elapsed time, verdict and results directory
  (shown above the table), and ``GET ./llmload/series`` the status and the charts' bounded time
  series per target (livecharts.py), which the page polls and draws with livecharts.js.
- ``before_swarm`` runs before Locust's ``POST /swarm`` handler, so a scenario chosen in the
  start form is loaded (user classes and shape in place) before Locust spawns anything.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from flask import Blueprint, Flask

from llmload.locust.liveview import COLUMNS, display_rows, to_csv
from llmload.measure.livewindow import WINDOW_S

F = TypeVar("F", bound=Callable[..., Any])
Handler = Callable[..., Any]  # a Flask view

TAB_KEY = "llm"
TAB_SCRIPT = """
(function () {
  var KEY = %(key)s, CAPTION = %(caption)s, STATUS = "", SERIES = null;
  function apply() {
    var onTab = new URLSearchParams(window.location.search).get("tab") === KEY;
    var box = document.getElementById("llmload-tab-head");
    if (!onTab) { if (box) box.remove(); return; }
    var table = document.querySelector(".MuiTableContainer-root");
    if (!table || (box && box.nextSibling === table)) return;
    if (box) box.remove();
    box = document.createElement("div");
    box.id = "llmload-tab-head";
    box.style.margin = "8px 0";
    var cap = document.createElement("span");
    cap.textContent = CAPTION + " ";
    var link = document.createElement("a");
    link.id = "llmload-csv";
    link.href = "./llmload/live.csv";
    link.textContent = "Download LLM table CSV";
    var run = document.createElement("div");
    run.id = "llmload-run-status";
    run.style.marginTop = "4px";
    run.textContent = STATUS;
    var charts = document.createElement("div");
    charts.id = "llmload-charts";
    box.appendChild(cap);
    box.appendChild(link);
    box.appendChild(run);
    box.appendChild(charts);
    table.parentNode.insertBefore(box, table);
    if (SERIES) window.llmloadCharts.draw(charts, SERIES);
  }
  function poll() {
    fetch("./llmload/series").then(function (r) { return r.json(); }).then(function (s) {
      STATUS = (s.status && s.status.line) || "";
      SERIES = s;
      var el = document.getElementById("llmload-run-status");
      if (el) el.textContent = STATUS;
      var charts = document.getElementById("llmload-charts");
      if (charts) window.llmloadCharts.draw(charts, SERIES);
    }).catch(function () {});
  }
  setInterval(apply, 500);
  setInterval(poll, 2000);
  poll();
})();
"""

CAPTION = (
    f"llmload's exact figures per target. While a test runs: output tok/s from tokens as they streamed, "
    f"over the last {WINDOW_S:g} s; TTFT (at each first token) and ITL (at each request's end) over the last "
    f"{WINDOW_S:g} s of samples (kept while none comes); req/s and TPOT over the requests that ended in the last {WINDOW_S:g} s; "
    "loop lag from the last reporting interval; requests and failures since the start (warm-up included). "
    "Once it stopped: the final figures of summary.json (warm-up excluded)."
)
CHARTS_JS = Path(__file__).with_name("livecharts.js")


def register(
    web_ui: Any,
    rows: Callable[[], list[dict[str, Any]]],
    before_swarm: Callable[[dict[str, str]], str | None] | None = None,
    status: Callable[[], dict[str, Any]] | None = None,
    series: Callable[[], dict[str, Any]] | None = None,
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
    _add_routes(bp, auth, rows, status, series)
    app.register_blueprint(bp)
    _require_password(app)
    _add_hooks(app, web_ui, rows, before_swarm)


def _add_routes(
    bp: Blueprint,
    auth: Callable[[Handler], Handler],
    rows: Callable[[], list[dict[str, Any]]],
    status: Callable[[], dict[str, Any]] | None,
    series: Callable[[], dict[str, Any]] | None,
) -> None:
    """The tab's JSON, CSV and script routes."""
    from flask import Response, jsonify, make_response

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
        """The charts' data: the run's status and, per target, its last points (livecharts.py)."""
        data = series() if series is not None else {"fields": [], "targets": {}}
        return jsonify({"status": status() if status is not None else {}, **data})

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
        tab = TAB_SCRIPT % {"key": json.dumps(TAB_KEY), "caption": json.dumps(CAPTION)}
        resp = make_response(CHARTS_JS.read_text(encoding="utf-8") + tab)
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
