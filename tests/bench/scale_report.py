"""The pure half of the scale benchmark's operator comparison: which operators run in which
order, the apiserver audit log as per-operator request counts, medians over runs, the table.

Kept apart from ``scale.py`` (which needs a plane) so that unit tests reach it
(tests/unit/test_scale_report.py).

Why the audit log: the two operators count their own requests differently (ours by verb and
resource; the Go operator only by code, host and method, through controller-runtime), so the
comparable figures come from the apiserver's side. Each operator runs under a ServiceAccount of
``OPERATORS_NAMESPACE``, and the bench plane's apiserver logs, at ``Metadata`` level and at the
ResponseComplete stage only, the requests of that namespace's ServiceAccounts and nothing else.

Invariants and failure modes:
- A request is counted when it completes: a watch lands in the window in which it ends, so
  ``watch`` counts are noise and the totals leave them out.
- The log is read by byte offsets taken at a window's start and end; a line the apiserver has
  not finished writing at the end offset is left for nobody (the window ends before it), and a
  line that is not JSON (a torn write) is skipped rather than failing the run.
- Medians are taken per figure over the runs that finished; a config with no finished run shows
  ``-`` in every cell and its errors below the table.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPERATORS_NAMESPACE = "bench-operators"
KINDS = ("ours", "go")
GO_DEFAULT_CONCURRENCY = 1  # upstream: DefaultReconcileConcurrency


@dataclass(frozen=True)
class OperatorConfig:
    """One operator under test: ``kind`` is ``ours`` or ``go``; ``label`` is how the user wrote
    it (``go:10``) and names its column, its ServiceAccount and its log."""

    kind: str
    concurrency: int
    label: str

    @property
    def account(self) -> str:
        return "op-" + self.label.replace(":", "-")

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{OPERATORS_NAMESPACE}:{self.account}"


def parse_operators(spec: str, ours_concurrency: int) -> list[OperatorConfig]:
    """``ours,go,go:10`` -> configs; the concurrency defaults to ``--concurrency`` for ours and
    to the Go operator's own default (1) for go. Duplicates and unknown names are errors."""
    out: list[OperatorConfig] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        kind, _, conc = item.partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown operator {kind!r} in {spec!r} (known: {', '.join(KINDS)})")
        if conc:
            if not conc.isdigit() or int(conc) < 1:
                raise ValueError(f"concurrency must be a positive integer: {item!r}")
            concurrency = int(conc)
        else:
            concurrency = ours_concurrency if kind == "ours" else GO_DEFAULT_CONCURRENCY
        label = f"{kind}:{conc}" if conc else kind
        if any(c.label == label for c in out):
            raise ValueError(f"operator {label!r} given twice")
        out.append(OperatorConfig(kind, concurrency, label))
    if not out:
        raise ValueError("no operator given")
    return out


def run_order(configs: Sequence[OperatorConfig], runs: int) -> list[tuple[int, OperatorConfig]]:
    """(run index, config), interleaved: every config once, then again, ``runs`` times, so that
    a slow phase of the machine spreads over all configs rather than landing on one."""
    return [(k, cfg) for k in range(runs) for cfg in configs]


def audit_policy() -> dict[str, Any]:
    """Metadata of the operators' requests (their ServiceAccounts' group), on completion only."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted", "Panic"],
        "rules": [
            {"level": "Metadata", "userGroups": [f"system:serviceaccounts:{OPERATORS_NAMESPACE}"]},
            {"level": "None"},
        ],
    }


def audit_apiserver_args(policy: Path, log: Path) -> tuple[str, ...]:
    return (
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log}",
        "--audit-log-format=json",
        "--audit-log-maxsize=0",
    )


class AuditLog:
    """A JSON-lines log read window by window through byte offsets, each window ending at a
    complete line: the apiserver's audit log, and KWOK's log for ``kwok_play``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def offset(self) -> int:
        """Where the next window starts: the end of the last complete line."""
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                # An event's metadata is well under a KiB; the tail holds the last newline.
                tail = max(0, size - 65536)
                f.seek(tail)
                data = f.read()
        except FileNotFoundError:
            return 0
        last = data.rfind(b"\n")
        return tail + last + 1 if last >= 0 else tail

    def lines(self, start: int, end: int) -> list[bytes]:
        try:
            with open(self.path, "rb") as f:
                f.seek(start)
                data = f.read(max(0, end - start))
        except FileNotFoundError:
            return []
        return data.splitlines()


def parse_audit(lines: Iterable[bytes | str], username: str) -> Counter[tuple[str, str, int]]:
    """Completed requests of ``username`` by (verb, resource[/subresource], response code).
    Requests with no object (discovery, /version) count under resource ``nonresource``."""
    out: Counter[tuple[str, str, int]] = Counter()
    for line in lines:
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue  # a torn write; see the module docstring
        if not isinstance(ev, dict) or ev.get("stage", "ResponseComplete") != "ResponseComplete":
            continue
        if (ev.get("user") or {}).get("username") != username:
            continue
        ref = ev.get("objectRef") or {}
        resource = ref.get("resource") or "nonresource"
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        code = int((ev.get("responseStatus") or {}).get("code") or 0)
        out[(str(ev.get("verb", "")), resource, code)] += 1
    return out


def audit_figures(counts: Counter[tuple[str, str, int]], clusters: int) -> dict[str, Any]:
    """Per-cluster request figures of one window: by "verb resource", the total (watches left
    out), status writes (update or patch of rayclusters/status) and 409 conflicts."""
    by_verb: Counter[str] = Counter()
    for (verb, resource, _code), n in counts.items():
        by_verb[f"{verb} {resource}"] += n
    total = sum(n for (verb, _r, _c), n in counts.items() if verb != "watch")
    status = sum(
        n
        for (verb, resource, _c), n in counts.items()
        if verb in ("update", "patch") and resource == "rayclusters/status"
    )
    per = max(clusters, 1)
    return {
        "requests_per_cluster": {k: round(v / per, 2) for k, v in sorted(by_verb.items())},
        "requests_total_per_cluster": round(total / per, 2),
        "status_writes_per_cluster": round(status / per, 2),
        "conflicts_409": sum(n for (_v, _r, code), n in counts.items() if code == 409),
        "errors_5xx": sum(n for (_v, _r, code), n in counts.items() if code >= 500),
    }


# ---------------------------------------------------------------------------------- timeline
def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0..1) of ``values``; 0 when there are none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def pod_timeline(
    created: Mapping[str, float],
    bound: Mapping[str, float],
    ready: Mapping[str, float],
    window: float = 5.0,
) -> dict[str, Any]:
    """How pods moved through the plane, from the seconds (since the size started) at which the
    benchmark's watch first saw each pod, first saw it bound to a node, and first saw it Ready.

    Two operators that make the same pods in the same total time can still leave different
    work to the plane: creates in bursts queue up behind the scheduler and KWOK, and the
    pods then wait after they exist. ``create_rate_*`` is pods seen per second per ``window``
    (the last, partial window left out), ``ready_lag_*`` the wait from seen to Ready,
    ``bound_to_ready_*`` the part of it after binding (KWOK's share here), and
    ``bound_not_ready_peak`` the most pods bound and not yet Ready at any one time."""
    out: dict[str, Any] = {}
    if created:
        slots = [0] * (int(max(created.values()) // window) + 1)
        for t in created.values():
            slots[int(max(0.0, t) // window)] += 1
        rates = [n / window for n in (slots[:-1] or slots)]
        out["create_rate_per_s_median"] = round(statistics.median(rates), 1)
        out["create_rate_per_s_max"] = round(max(rates), 1)
    lags = [ready[k] - created[k] for k in ready if k in created]
    waits = [ready[k] - bound[k] for k in ready if k in bound]
    for name, values in (("ready_lag_s", lags), ("bound_to_ready_s", waits)):
        out[f"{name}_p50"] = round(percentile(values, 0.5), 2)
        out[f"{name}_p99"] = round(percentile(values, 0.99), 2)
    # A sweep over bind (+1) and Ready (-1) moments; at equal times the Ready goes first.
    moments = sorted(
        [(t, 1) for t in bound.values()] + [(ready[k], -1) for k in ready if k in bound]
    )
    level = peak = 0
    for _t, step in moments:
        level += step
        peak = max(peak, level)
    out["bound_not_ready_peak"] = peak
    return out


def status_lag(
    cluster_ready: Mapping[str, float],
    pod_ready: Mapping[str, float],
    pod_cluster: Mapping[str, str],
) -> dict[str, float]:
    """How long each cluster's ``ready`` status came after the last of its pods was Ready, from
    the benchmark's two watches (seconds since the size started). A RayJob waits for that
    status, so in a burst this is the delay its submission sees, whatever the pod rate.

    Clusters never seen ready, or with no Ready pod seen, are left out. The two watches are
    separate streams, so a status seen a moment before its last pod counts as 0, not below."""
    last: dict[str, float] = {}
    for pod, at in pod_ready.items():
        owner = pod_cluster.get(pod)
        if owner is not None:
            last[owner] = max(at, last.get(owner, at))
    lags = [max(0.0, at - last[c]) for c, at in cluster_ready.items() if c in last]
    return {
        "status_lag_s_p50": round(percentile(lags, 0.5), 1),
        "status_lag_s_p90": round(percentile(lags, 0.9), 1),
        "status_lag_s_max": round(max(lags, default=0.0), 1),
    }


def cpu_budget(
    operator_cpu_s: float, plane_cpu_s: Mapping[str, float], pods: int, wall_s: float, cores: int
) -> dict[str, Any]:
    """Where the machine's CPU went while a size converged, per pod, and how busy it was.

    On this 2-core machine the local plane, KWOK and the operator share the cores, so pods
    Ready/s is bounded by (cores * wall) / (CPU per pod). ``ms_per_pod`` is that CPU per pod,
    by component and in total, and does not depend on how long the run took: when a run is
    slow and every component's share grew alike, the machine was slower (a busy neighbour),
    not the operator. ``busy_share`` is the total over ``cores * wall_s``; near 1 the run was
    CPU-bound and a cheaper operator or plane would have been faster."""
    parts = {"operator": operator_cpu_s, **plane_cpu_s}
    total = sum(parts.values())
    return {
        "ms_per_pod": {k: round(1000 * v / pods, 2) for k, v in parts.items()} if pods else {},
        "total_ms_per_pod": round(1000 * total / pods, 2) if pods else 0.0,
        "busy_share": round(total / (cores * wall_s), 2) if wall_s > 0 and cores > 0 else 0.0,
    }


def kwok_play(lines: Iterable[bytes | str], pods: int) -> dict[str, Any]:
    """What KWOK's log says it did to pods in a run: status patches per pod, pods it patched
    more than once, and stages that failed.

    KWOK queues a job each time its watch delivers a pod in a state a stage matches, and an
    immediate job it replaces is not cancelled (v0.8.0): a pod delivered twice before KWOK's
    own patch is seen gets a second patch from the stale copy, which the apiserver refuses (a
    second pod IP) and KWOK logs as a failed stage. A run where this happens spends the plane's CPU twice on the
    same pods and is slower whichever operator ran; these figures let a reader tell such a run
    from a slow operator."""
    patched: Counter[str] = Counter()
    failed = 0
    for raw in lines:
        line = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        if "Patch pod" not in line and "failed to apply stage" not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by the log's end, or not KWOK's JSON
        if entry.get("msg") == "Patch pod":
            patched[str(entry.get("pod"))] += 1
        elif entry.get("msg") == "failed to apply stage":
            failed += 1
    total = sum(patched.values())
    return {
        "patches_per_pod": round(total / pods, 2) if pods else 0.0,
        "pods_patched_twice": sum(1 for n in patched.values() if n > 1),
        "failed_stages": failed,
    }


CPU_PARTS = (
    "operator",
    "kube-apiserver",
    "etcd",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)

TIMELINE_ROWS = (
    ("create_rate_per_s_median", "pods created per second, median 5 s window"),
    ("create_rate_per_s_max", "pods created per second, busiest 5 s window"),
    ("ready_lag_s_p50", "pod seen -> Ready p50, s"),
    ("ready_lag_s_p99", "pod seen -> Ready p99, s"),
    ("bound_to_ready_s_p50", "pod bound -> Ready p50, s"),
    ("bound_to_ready_s_p99", "pod bound -> Ready p99, s"),
    ("bound_not_ready_peak", "pods bound, not yet Ready, peak"),
    ("status_lag_s_p50", "cluster's last pod Ready -> cluster ready p50, s"),
    ("status_lag_s_p90", "cluster's last pod Ready -> cluster ready p90, s"),
    ("status_lag_s_max", "cluster's last pod Ready -> cluster ready max, s"),
)


# ---------------------------------------------------------------------------------- medians
def terminated_by_resource(server: Mapping[tuple[str, str], float]) -> dict[str, int]:
    """The watchers the apiserver closed for falling behind their events, by resource, from
    ``apiserver_requests``' ("TERMINATED", resource) entries. The total alone cannot tell a slow
    KWOK pod watch (which then resumes or relists every pod) from a slow lease or event watch."""
    return {
        res or "-": int(v)
        for (verb, res), v in sorted(server.items())
        if verb == "TERMINATED" and v > 0
    }


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def median_of(values: Sequence[Any]) -> Any:
    """The figure-by-figure median of results of the same shape: numbers by median (a key that
    some runs lack counts as 0 there, as in request-count maps), dicts key by key, lists item by
    item, anything else from the first run."""
    if not values:
        return None
    first = values[0]
    if all(_number(v) for v in values):
        m = statistics.median(values)
        if all(isinstance(v, int) for v in values) and m == int(m):
            return int(m)  # two runs of 1000 clusters: 1000, not 1000.0 (sizes are named by it)
        return round(m, 2) if isinstance(m, float) else m
    if isinstance(first, dict):
        dicts = [v for v in values if isinstance(v, dict)]
        keys: list[str] = []
        for d in dicts:
            keys += [k for k in d if k not in keys]
        out: dict[str, Any] = {}
        for k in keys:
            present = [d[k] for d in dicts if k in d]
            if all(_number(p) for p in present):
                present += [0] * (len(dicts) - len(present))
            out[k] = median_of(present)
        return out
    if isinstance(first, list):
        lists = [v for v in values if isinstance(v, list)]
        return [median_of([lst[i] for lst in lists if i < len(lst)]) for i in range(len(first))]
    return first


def median_result(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The median over the finished runs of one config; ``{"error": ...}`` when none finished."""
    done = [r for r in runs if "error" not in r]
    if not done:
        return {"error": "; ".join(str(r["error"]) for r in runs) or "no run"}
    out: dict[str, Any] = median_of([{k: v for k, v in r.items() if k != "run"} for r in done])
    out["runs_finished"] = len(done)
    return out


# ---------------------------------------------------------------------------------- table
def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _ratio(a: Any, b: Any) -> str:
    if not (_number(a) and _number(b)) or b == 0:
        return "-"
    return f"{a / b:.2f}"


def _size(result: dict[str, Any], tag: str) -> dict[str, Any]:
    for r in result.get("sizes") or []:
        if f"{r['clusters']}x{r['workers']}" == tag:
            return dict(r)
    return {}


def best_go(
    medians: dict[str, dict[str, Any]], configs: Sequence[OperatorConfig], tag: str
) -> str | None:
    """The Go config with the higher pods Ready/s at size ``tag`` (None when none finished)."""
    rated = [
        (_size(medians[c.label], tag).get("pods_ready_per_s"), c.label)
        for c in configs
        if c.kind == "go"
    ]
    rated = [(rate, label) for rate, label in rated if _number(rate)]
    return max(rated)[1] if rated else None


def _only_go(configs: Sequence[OperatorConfig]) -> str | None:
    """The ratio's baseline for a run of the phases only (``--sizes ''``), where no size picks
    the faster Go config: the Go config when there is just one."""
    go_labels = [c.label for c in configs if c.kind == "go"]
    return go_labels[0] if len(go_labels) == 1 else None


def _size_rows(tag: str, sizes: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(figure, {label: value}) rows for one size."""

    def row(name: str, get: Any) -> tuple[str, dict[str, Any]]:
        return f"{tag}: {name}", {label: (get(s) if s else None) for label, s in sizes.items()}

    def audit(s: dict[str, Any]) -> dict[str, Any]:
        return dict(s.get("audit") or {})

    rows = [
        row("pods Ready per second", lambda s: s.get("pods_ready_per_s")),
        row("pods Ready per second / ceiling", lambda s: s.get("fraction_of_ceiling")),
        row("all pods Ready, s", lambda s: s.get("all_pods_ready_s")),
        row("all clusters ready, s", lambda s: s.get("all_ready_s")),
        row("all pods exist, s", lambda s: s.get("all_pods_exist_s")),
        row("operator CPU, s", lambda s: s.get("operator_cpu_s")),
        row("operator peak RSS, MiB", lambda s: s.get("operator_peak_rss_mib")),
        row("RSS per pod above idle, KiB", lambda s: s.get("rss_per_pod_kib")),
        row(
            "API requests per cluster (audit, no watches)",
            lambda s: audit(s).get("requests_total_per_cluster"),
        ),
    ]
    verbs: list[str] = []
    for s in sizes.values():
        verbs += [k for k in audit(s).get("requests_per_cluster") or {} if k not in verbs]
    for verb in sorted(verbs):
        rows.append(
            row(
                f"  {verb} per cluster",
                lambda s, v=verb: (audit(s).get("requests_per_cluster") or {}).get(v, 0),
            )
        )

    def timeline(s: dict[str, Any]) -> dict[str, Any]:
        return dict(s.get("timeline") or {})

    rows += [row(f"  {name}", lambda s, k=key: timeline(s).get(k)) for key, name in TIMELINE_ROWS]

    def cpu(s: dict[str, Any]) -> dict[str, Any]:
        return dict(s.get("cpu_budget") or {})

    rows += [
        row("machine CPU per pod, ms (operator + plane)", lambda s: cpu(s).get("total_ms_per_pod")),
        *(
            row(f"  {part}, ms per pod", lambda s, p=part: (cpu(s).get("ms_per_pod") or {}).get(p))
            for part in CPU_PARTS
        ),
        row("machine busy share (CPU-s / (cores * wall))", lambda s: cpu(s).get("busy_share")),
        row(
            "speed probe, s (fixed loop; higher = slower machine)", lambda s: s.get("speed_probe_s")
        ),
    ]

    def kwok(s: dict[str, Any]) -> dict[str, Any]:
        return dict(s.get("kwok") or {})

    rows += [
        row("KWOK: status patches per pod", lambda s: kwok(s).get("patches_per_pod")),
        row("KWOK: pods patched twice", lambda s: kwok(s).get("pods_patched_twice")),
        row("KWOK: failed stages", lambda s: kwok(s).get("failed_stages")),
        row("apiserver: watchers closed as too slow", lambda s: s.get("watchers_terminated")),
    ]
    closed: list[str] = []
    for s in sizes.values():
        closed += [k for k in s.get("watchers_terminated_by_resource") or {} if k not in closed]
    rows += [
        row(
            f"  of them, {res}",
            lambda s, r=res: (s.get("watchers_terminated_by_resource") or {}).get(r, 0),
        )
        for res in closed
    ]
    rows += [
        row(
            "status writes per cluster (audit)", lambda s: audit(s).get("status_writes_per_cluster")
        ),
        row("409 conflicts (audit)", lambda s: audit(s).get("conflicts_409")),
        row("reconciles per cluster (metric)", lambda s: s.get("reconciles_per_cluster")),
        row("operator steady RSS, MiB", lambda s: s.get("operator_steady_rss_mib")),
    ]

    def resync(s: dict[str, Any]) -> dict[str, Any]:
        return dict(s.get("resync") or {})

    rows += [
        row("resync: window, s", lambda s: resync(s).get("window_s")),
        row(
            "resync: operator CPU share of one core", lambda s: resync(s).get("operator_cpu_share")
        ),
        row("resync: reconciles per cluster", lambda s: resync(s).get("reconciles_per_cluster")),
        row("resync: CPU ms per reconcile", lambda s: resync(s).get("cpu_ms_per_reconcile")),
        row("resync: API requests per cluster", lambda s: resync(s).get("requests_per_cluster")),
        row(
            "resync: status writes per cluster",
            lambda s: resync(s).get("status_writes_per_cluster"),
        ),
        row("resync: operator RSS, MiB", lambda s: resync(s).get("operator_rss_mib")),
    ]
    # A figure no config has (the ceiling's fraction without a ceiling run) is left out.
    return [(name, values) for name, values in rows if any(v is not None for v in values.values())]


def comparison_markdown(
    configs: Sequence[OperatorConfig],
    medians: dict[str, dict[str, Any]],
    runs: int,
    ceiling: dict[str, Any] | None = None,
) -> str:
    """One table: a column per config (the median over ``runs``) and ``ours ÷ best Go``, where
    best Go is, per size, the Go config with the higher pods Ready/s (for the phases that are
    not per size, the best at the last size)."""
    labels = [c.label for c in configs]
    ours = next((c.label for c in configs if c.kind == "ours"), None)
    has_go = any(c.kind == "go" for c in configs)
    compare = ours is not None and has_go
    head = ["figure", *labels] + (["ours ÷ best Go"] if compare else [])
    lines = [
        f"Median of {runs} run(s) per operator; each operator alone on the plane.",
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * (len(head) - 1),
    ]

    def emit(name: str, values: dict[str, Any], best: str | None) -> None:
        cells = [_fmt(values.get(label)) for label in labels]
        if compare:
            assert ours is not None
            cells.append(_ratio(values.get(ours), values.get(best)) if best else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    if ceiling:
        lines.append(
            f"| ceiling (no operator), pods/s | {ceiling.get('ceiling_pods_per_second')} |"
            + " |" * (len(head) - 2)
        )
    tags: list[str] = []
    for label in labels:
        for r in medians[label].get("sizes") or []:
            tag = f"{r['clusters']}x{r['workers']}"
            if tag not in tags:
                tags.append(tag)
    last_best = None if tags else _only_go(configs)
    emit(
        "operator idle RSS, MiB",
        {label: medians[label].get("operator_idle_rss_mib") for label in labels},
        best_go(medians, configs, tags[-1]) if tags else None,
    )
    for tag in tags:
        best = best_go(medians, configs, tag)
        last_best = best
        if compare:
            lines.append(
                f"| {tag}: best Go config (by pods Ready/s) |"
                + " |" * len(labels)
                + f" {best or '-'} |"
            )
        sizes = {label: _size(medians[label], tag) for label in labels}
        for name, values in _size_rows(tag, sizes):
            emit(name, values, best)
    fair = {label: medians[label].get("fairness") or {} for label in labels}
    if any(fair.values()):
        for key, name in (
            ("idle_p50_s", "fairness: small cluster ready p50 idle, s"),
            ("idle_p99_s", "fairness: small cluster ready p99 idle, s"),
            ("busy_p50_s", "fairness: small cluster ready p50 during big scale-up, s"),
            ("busy_p99_s", "fairness: small cluster ready p99 during big scale-up, s"),
            ("p99_penalty_s", "fairness: p99 penalty (during minus idle), s"),
            ("big_cluster_ready_s", "fairness: big cluster ready, s"),
            ("busy_operator_cpu_s", "fairness: operator CPU during the scale-up, s"),
            ("busy_status_writes", "fairness: status writes during the scale-up"),
            ("busy_requests", "fairness: API requests during the scale-up"),
        ):
            emit(name, {label: fair[label].get(key) for label in labels}, last_best)
    churn = {label: medians[label].get("churn") or {} for label in labels}
    if any(churn.values()):
        for key, name in (
            ("max_convergence_s", "churn: max convergence, s"),
            ("duplicate_pods", "churn: duplicate pods"),
            ("orphaned_pods", "churn: orphaned pods"),
        ):
            emit(name, {label: churn[label].get(key) for label in labels}, last_best)
    errors = [
        f"- {label}: {medians[label]['error']}" for label in labels if "error" in medians[label]
    ]
    if errors:
        lines += ["", "Failed (no finished run):", *errors]
    return "\n".join(lines)
