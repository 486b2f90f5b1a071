"""The CI gate: recall absolutely at the baseline headline's parameters, QPS as a ratio to a peer."""

from __future__ import annotations

from pathlib import Path

from vdbbench.bench.report import fmt_params, paired_ratio
from vdbbench.bench.results import headline_entry, load_result, measured_on
from vdbbench.common.recall import RECALL_TARGET


def _peer_result(result_path: Path, peer: str, what: str, ours: dict) -> dict:
    path = Path(result_path).parent / f"{peer}.json"
    try:
        r = load_result(path)
    except ValueError:
        raise ValueError(
            f"no result for peer {peer!r} next to the {what} ({path}); run with --compare {peer}"
        ) from None
    # a peer file left in the folder by an earlier run on other data would give a ratio of nothing
    if measured_on(r) != measured_on(ours):
        raise ValueError(
            f"the peer result next to the {what} ({path}) was measured on {r['dataset']['name']} "
            f"({r['dataset']['nq']} queries), the {what} on {ours['dataset']['name']} "
            f"({ours['dataset']['nq']} queries): not the same run; run with --compare {peer}"
        )
    return r


def check(
    result_path, baseline_path, min_recall: float = RECALL_TARGET, max_qps_drop: float = 0.10, peer: str | None = None
) -> tuple[list[str], list[str]]:
    """(violations, notes): one line per violated rule, and what was checked and passed.

    ValueError when a file cannot be used at all (not a result, peer result missing).
    """
    res = load_result(result_path)
    base = load_result(baseline_path)
    bad: list[str] = []
    ok: list[str] = []

    if res["index"]["name"] != base["index"]["name"]:
        bad.append(f"result is for index {res['index']['name']!r}, baseline for {base['index']['name']!r}")
    if res["dataset"]["sha256"] != base["dataset"]["sha256"]:
        bad.append(
            f"result was measured on {res['dataset']['name']} (sha256 {res['dataset']['sha256'][:12]}), "
            f"baseline on {base['dataset']['name']} (sha256 {base['dataset']['sha256'][:12]}): not comparable"
        )

    if res["dataset"]["nq"] != base["dataset"]["nq"]:
        bad.append(f"result used {res['dataset']['nq']} queries, baseline {base['dataset']['nq']}: "
                   f"recall is not comparable (run without --queries, or with the baseline's)")

    if _rule(res) != _rule(base):
        bad.append(f"result chose its headlines at {_say_rule(res)}, baseline at {_say_rule(base)}: its QPS ratios "
                   f"are of other points (run with the baseline's --target-recall and --recall-confidence)")

    # Recall: absolute, at the parameters of each baseline headline (same params, once each).
    wanted: dict[str, dict] = {}
    for h in base["headline"]:
        if h["params"] is not None:
            wanted.setdefault(fmt_params(h["params"]), h["params"])
    if not wanted:
        bad.append(f"baseline {baseline_path} has no headline point (it missed its own target)")
    for label, params in wanted.items():
        found = [p for p in res["points"] if _same_point(p["params"], params)]
        if not found:
            bad.append(f"recall: result has no point at {label} (the baseline headline's parameters); "
                       f"include them in the sweep")
            continue
        recall = min(p["recall10"] for p in found)
        if recall < min_recall:
            bad.append(f"recall: recall10 {recall:.4f} < {min_recall:g} at {label}")
        else:
            ok.append(f"recall10 {recall:.4f} >= {min_recall:g} at {label}")

    # QPS: ours/peer in the result's run vs ours/peer in the baseline's run, per mode/threads.
    if peer is None:
        ok.append("QPS not gated (no --peer given)")
        return bad, ok
    peer_res = _peer_result(result_path, peer, "result", res)
    peer_base = _peer_result(baseline_path, peer, "baseline", base)
    compared = 0
    for h in base["headline"]:
        mode, t = h["mode"], h["threads"]
        b_ours, b_peer = headline_entry(base, mode, t), headline_entry(peer_base, mode, t)
        if b_ours is None or b_peer is None:
            continue
        where = f"{mode} @ {t} thread{'s' if t > 1 else ''}"
        r_ours, r_peer = headline_entry(res, mode, t), headline_entry(peer_res, mode, t)
        if r_ours is None:
            bad.append(f"qps: {res['index']['name']} reaches no recall10 >= target at {where} (baseline did)")
            continue
        if r_peer is None:
            bad.append(f"qps: peer {peer} reaches no recall10 >= target at {where}; no ratio to gate on")
            continue
        compared += 1
        now, then = paired_ratio(r_ours, r_peer), paired_ratio(b_ours, b_peer)
        drop = 1.0 - now / then
        text = f"QPS ratio {res['index']['name']}/{peer} at {where}: {now:.2f}x vs baseline {then:.2f}x"
        if drop > max_qps_drop:
            bad.append(f"qps: {text} (down {drop:.0%}, allowed {max_qps_drop:.0%})")
        else:
            ok.append(text)
    if compared == 0 and not any(line.startswith("qps:") for line in bad):
        bad.append(f"qps: baseline and result share no mode/threads where both {res['index']['name']} and {peer} have a headline")
    return bad, ok


def _rule(result: dict) -> tuple[float, float]:
    """How a run chose its headlines: its target recall and its recall confidence (0: the mean)."""
    run = result.get("run", {})
    return run.get("target_recall", RECALL_TARGET), run.get("recall_confidence") or 0.0


def _say_rule(result: dict) -> str:
    target, confidence = _rule(result)
    held = f" (its {confidence:g} lower bound)" if confidence else " (the mean)"
    return f"recall@10 >= {target:g}{held}"


def _same_point(params: dict, baseline: dict) -> bool:
    """Whether a result point's ``params`` are the baseline's: the same, or the same plus knobs
    added since the baseline was recorded, each at 0 (how a new knob says "off", as `reorder`
    does), so a baseline from before a knob existed still names its point."""
    if params == baseline:
        return True
    extra = params.keys() - baseline.keys()
    return (baseline.keys() <= params.keys() and all(params[k] == 0 for k in extra)
            and all(params[k] == v for k, v in baseline.items()))
