"""Query-adaptive probing, simulated: fewer lists at equal recall@10 than a fixed nprobe?

A rule gives each query its own number of lists n_i <= cap from its routed centroid distances
(SPANN's "query-aware dynamic pruning" and relatives); the query probes its n_i nearest lists.
Reads the centroids and every list's ids from an IvfIndex file (persist.rs layout), routes every
query flat (all centroids, exact float distances), and takes a query's recall@10 at n lists as
the share of its 10 true neighbours whose list is among its n nearest (u8 codes are exact on the
integer replica and rerank is 0, so a probed neighbour is found). Rules, all prefixes of the
routed order (d_r: Euclidean distance to the r-th nearest centroid, r = 0 nearest):
  fixed      n_i = n
  lin        d_r <= (1 + eps) d_0                   (SPANN)
  sq         d_r^2 <= (1 + eps) d_0^2               (the same family as lin, eps' = sqrt(1+eps)-1)
  gapK       d_r^2 - d_0^2 <= eps (d_K^2 - d_0^2)   (the gap scaled by the K-th routed centroid's)
  each with a cap (at most cap lists) and a floor (at least floor lists).
eps is chosen on the tuning queries (rows 0..999) as the cheapest point with recall >= 0.95; the
held-out queries (1000..9999) check it. Then the engine itself checks the simulation: fixed
nprobe through the real search (two-level routing), and the chosen rules' per-query n_i through
one call per query (`search(q[i:i+1], nprobe=n_i, rerank=0)`, whose lists are the n_i nearest).

Bounds beside them: an oracle that knows where each query's neighbours are (the most a
per-query count could save), and a rule on the query's own neighbour scale after its first F
lists (d_r^2 - d_0^2 <= beta * its 10th-best squared distance so far).

Usage: python benchmarks/perf/adaptive_sim.py INDEX.vdb [DATASET] [--engine-check]
(INDEX.vdb: an IvfIndex of DATASET, default synth-sift-1m, saved with IvfIndex.save.)
"""
from usage import help_or_usage
help_or_usage(__doc__, 1)
import sys

import numpy as np

from vdbbench.common.recall import knn_recall_per_query
from vdbbench.datasets.loader import load_dataset

TARGET, NMAX, TUNE = 0.95, 256, 1000
path = sys.argv[1]
dsname = next((a for a in sys.argv[2:] if not a.startswith("--")), "synth-sift-1m")
ds = load_dataset(dsname)
base = np.ascontiguousarray(ds.train, dtype=np.float32)
Q = np.ascontiguousarray(ds.test, dtype=np.float32)
nq, gt = Q.shape[0], ds.neighbors[:, :10]

# The index file: header, centroids, quantizer, then per list (n, ids, codes, f16 vectors).
raw = np.memmap(path, dtype=np.uint8, mode="r")
dim, storage, has_sq = int(raw[12:16].view("<u4")[0]), int(raw[17]), int(raw[19])
nlist = int(raw[36:44].view("<u8")[0])
assert storage == 2, "u8+f16 storage expected"
pos = 52
C = np.array(raw[pos:pos + nlist * dim * 4].view("<f4").reshape(nlist, dim))
pos += nlist * dim * 4 + (2 * dim * 4 if has_sq else 0)
list_of = np.empty(base.shape[0], np.int32)
sizes = np.empty(nlist, np.int64)
members = []
for li in range(nlist):
    n = int(raw[pos:pos + 8].view("<u8")[0])
    ids = np.array(raw[pos + 8:pos + 8 + 8 * n].view("<i8"))
    list_of[ids] = li
    sizes[li] = n
    members.append(ids)
    pos += 8 + 8 * n + n * dim * 3

# Flat routing: the NMAX nearest centroids per query, nearest first, squared distances.
cn = (C.astype(np.float64) ** 2).sum(1)
order = np.empty((nq, NMAX), np.int32)
d2 = np.empty((nq, NMAX), np.float64)
for a in range(0, nq, 1000):
    q = Q[a:a + 1000].astype(np.float64)
    full = (q ** 2).sum(1)[:, None] + cn[None, :] - 2 * q @ C.T.astype(np.float64)
    part = np.argpartition(full, NMAX, axis=1)[:, :NMAX]
    pd = np.take_along_axis(full, part, 1)
    o = np.argsort(pd, axis=1, kind="stable")
    order[a:a + 1000] = np.take_along_axis(part, o, 1)
    d2[a:a + 1000] = np.maximum(np.take_along_axis(pd, o, 1), 0)
d = np.sqrt(d2)
# rank of each true neighbour's list in the query's routed order (NMAX: beyond it)
rank = np.full((nq, 10), NMAX, np.int32)
for i in range(nq):
    pos_of = dict(zip(order[i].tolist(), range(NMAX)))
    rank[i] = [pos_of.get(int(l), NMAX) for l in list_of[gt[i]]]
codes_cum = np.cumsum(sizes[order], axis=1)  # codes scanned probing the first r+1 lists


def evaluate(n, rows):
    """(recall@10, mean lists, mean codes) of per-query list counts n (1..NMAX) over rows."""
    n = n[rows]
    rec = (rank[rows] < n[:, None]).mean()
    return rec, n.mean(), codes_cum[rows, n - 1].mean()


def rule(kind, eps, cap, floor=1, K=None):
    if kind == "fixed":
        n = np.full(nq, cap)
    elif kind == "lin":
        n = (d[:, :cap] <= (1 + eps) * d[:, :1]).sum(1)
    elif kind == "sq":
        n = (d2[:, :cap] <= (1 + eps) * d2[:, :1]).sum(1)
    else:  # gapK
        n = ((d2[:, :cap] - d2[:, :1]) <= eps * (d2[:, K:K + 1] - d2[:, :1])).sum(1)
    return np.clip(n, max(1, floor), cap)


tune, held = np.arange(TUNE), np.arange(TUNE, nq)
print(f"{dsname}: nlist {nlist}, {nq} queries (tune 0..{TUNE - 1}, held out {TUNE}..{nq - 1}); "
      f"mean list size {sizes.mean():.0f}, list size of the probed lists grows with rank: "
      f"rank 0 {sizes[order[:, 0]].mean():.0f}, rank 49 {sizes[order[:, 49]].mean():.0f}")

# Fixed nprobe: the reference curve.
print("\nfixed nprobe: nprobe, recall tune, recall held, mean codes held")
fixed_curve = []
for n in range(30, 81, 2):
    rt, _, _ = evaluate(rule("fixed", 0, n), tune)
    rh, lh, ch = evaluate(rule("fixed", 0, n), held)
    fixed_curve.append((rh, lh, ch))
    print(f"  {n:3d}  {rt:.4f}  {rh:.4f}  {ch:,.0f}")
fixed_pick = next(n for n in range(1, NMAX) if evaluate(rule("fixed", 0, n), tune)[0] >= TARGET)


def interp(curve, x=TARGET):
    """Mean lists and codes where a held-out curve (recall, lists, codes), sorted, crosses x."""
    curve = sorted(curve)
    r = np.array([c[0] for c in curve])
    if r[-1] < x:
        return float("nan"), float("nan")
    return (float(np.interp(x, r, [c[1] for c in curve])),
            float(np.interp(x, r, [c[2] for c in curve])))


fl, fc = interp(fixed_curve)
fixed_curve_wide = [evaluate(rule("fixed", 0, n), held) for n in range(10, 161)]
print(f"fixed, interpolated at held-out recall {TARGET}: {fl:.2f} lists, {fc:,.0f} codes")

families = []
eps_grid = {"lin": np.linspace(0.02, 1.0, 99), "sq": np.linspace(0.04, 2.0, 99),
            "gap": np.linspace(0.05, 3.0, 119)}
for cap in (64, 96, 128, 192):
    for floor in (1, 8, 16, 24, 32):
        families.append(("lin", cap, floor, None))
        families.append(("sq", cap, floor, None))
        for K in (16, 32, 64):
            if K < cap:
                families.append((f"gap{K}", cap, floor, K))

print("\nadaptive rules: eps chosen on tune (cheapest with recall >= 0.95), then held out;"
      " 'interp' = held-out curve at 0.95")
print("  rule    cap floor  eps    | tune rec lists codes    | held rec lists codes     "
      "| codes / fixed(pick) | interp lists codes / fixed(interp)")
rf, lf, cf = evaluate(rule("fixed", 0, fixed_pick), held)
print(f"  fixed nprobe {fixed_pick} (chosen on tune, recall {evaluate(rule('fixed', 0, fixed_pick), tune)[0]:.4f}): held recall {rf:.4f}, {lf:.1f} lists, "
      f"{cf:,.0f} codes")
rows, curves = [], {}
for kind, cap, floor, K in families:
    grid = eps_grid["gap" if K else kind]
    best, curve = None, []
    for eps in grid:
        n = rule("gap" if K else kind, eps, cap, floor, K)
        rt, lt, ct = evaluate(n, tune)
        curve.append(evaluate(n, held))
        if rt >= TARGET and (best is None or ct < best[3]):
            best = (eps, rt, lt, ct)
    curves[(kind, cap, floor)] = curve
    if best is None:
        continue
    eps = best[0]
    n = rule("gap" if K else kind, eps, cap, floor, K)
    rh, lh, ch = evaluate(n, held)
    il, ic = interp(curve)
    rows.append((ic / fc, kind, cap, floor, eps, best, (rh, lh, ch), il, n))
    print(f"  {kind:6s} {cap:4d} {floor:4d}  {eps:.3f} | {best[1]:.4f} {best[2]:5.1f} {best[3]:9,.0f} "
          f"| {rh:.4f} {lh:5.1f} {ch:9,.0f} | {ch / cf:.3f} | {il:5.1f} {ic:9,.0f} {ic / fc:.3f}")
rows.sort(key=lambda r: r[0])
print("\nbest five by interpolated held-out codes at recall 0.95:")
for r in rows[:5]:
    print(f"  {r[1]} cap {r[2]} floor {r[3]} eps {r[4]:.3f}: {r[7]:.1f} lists, codes {r[0]:.3f} of fixed;"
          f" chosen-eps held-out recall {r[6][0]:.4f}, codes {r[6][2] / cf:.3f} of fixed nprobe {fixed_pick}")


# How much any per-query rule could save: the oracle gives each query the list count that
# maximises hits - lam * codes (it knows where the true neighbours are), swept over lam.
srank = np.sort(rank, 1)
cand = np.minimum(np.concatenate([np.ones((nq, 1), np.int32), srank + 1], 1), NMAX)  # n values
hits = (rank[:, None, :] < cand[:, :, None]).sum(2)
cost = np.take_along_axis(codes_cum, cand - 1, 1)
oracle = []
for lam in np.geomspace(1e-6, 1e-2, 200):
    pick = np.argmax(hits - lam * cost, 1)
    n = np.take_along_axis(cand, pick[:, None], 1)[:, 0]
    oracle.append(evaluate(n, held))
ol, oc = interp(oracle)
need = srank[:, 9] + 1  # lists a query needs for all 10 (NMAX + 1: beyond NMAX)
print(f"\noracle (knows each query's neighbours' lists): held-out recall {TARGET} at {ol:.1f} lists, "
      f"{oc:,.0f} codes = {oc / fc:.3f} of fixed")
print(f"lists a held-out query needs for 10/10: median {np.median(need[held]):.0f}, p75 "
      f"{np.percentile(need[held], 75):.0f}, p90 {np.percentile(need[held], 90):.0f}, "
      f"p95 {np.percentile(need[held], 95):.0f}")


def spearman(a, b):
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


ratio = d[:, 49] / d[:, 0]
print(f"d_49 / d_0 (Euclidean) over held-out queries: median {np.median(ratio[held]):.3f}, p10 "
      f"{np.percentile(ratio[held], 10):.3f}, p90 {np.percentile(ratio[held], 90):.3f}; Spearman "
      f"with the lists needed: lin n_i (eps 0.28, no cap) {spearman(rule('lin', 0.28, NMAX)[held], need[held]):.3f}, "
      f"gap32 n_i (eps 1.175, no cap) {spearman(rule('gap', 1.175, NMAX, 1, 32)[held], need[held]):.3f}")

# A rule on the query's own neighbour scale: after its first F lists, D = its 10th-best squared
# distance so far; it probes list r (r >= F) only if d_r^2 - d_0^2 <= beta * D.
print("\nneighbour-scale rule (after F lists): d_r^2 - d_0^2 <= beta * D10(F)")
kth = {}
for F in (8, 16):
    D = np.empty(nq)
    for i in range(nq):
        ids = np.concatenate([members[li] for li in order[i, :F]])
        dd = ((base[ids] - Q[i]) ** 2).sum(1)
        D[i] = np.partition(dd, 9)[9] if dd.size >= 10 else np.inf
    kth[F] = D
rows2 = []
for F in (8, 16):
    for cap in (64, 96, 128):
        best, curve = None, []
        for beta in np.linspace(0.02, 2.0, 100):
            n = np.clip(((d2[:, :cap] - d2[:, :1]) <= beta * kth[F][:, None]).sum(1), F, cap)
            rt, lt, ct = evaluate(n, tune)
            curve.append(evaluate(n, held))
            if rt >= TARGET and (best is None or ct < best[2]):
                best = (beta, lt, ct, n, rt)
        curves[(f"kth{F}", cap, F)] = curve
        if best is None:
            continue
        rh, lh, ch = evaluate(best[3], held)
        il, ic = interp(curve)
        rows2.append((ic / fc, f"kth F {F}", cap, F, best[0], None, (rh, lh, ch), il, best[3]))
        print(f"  F {F:2d} cap {cap:3d} beta {best[0]:.2f}: tune recall {best[4]:.4f}, held recall {rh:.4f}, "
              f"{lh:.1f} lists, {ch:,.0f} codes = {ch / cf:.3f} of fixed nprobe {fixed_pick}; "
              f"interpolated {il:.1f} lists, {ic / fc:.3f}")
rows2.sort(key=lambda r: r[0])

curves[("oracle", NMAX, 1)] = oracle
targets = (0.90, 0.93, 0.95, 0.96, 0.97)
print("\nheld-out curves: mean lists (codes / fixed's) at held-out recall " + ", ".join(map(str, targets)))
for key in [("fixed", 0, 0), ("lin", 192, 1), ("sq", 192, 1), ("lin", 64, 1), ("lin", 64, 32),
            ("sq", 64, 32), ("gap32", 192, 1), ("gap32", 64, 1), ("gap16", 64, 1), ("gap64", 96, 1),
            ("kth16", 64, 16), ("kth8", 64, 8), ("kth16", 128, 16), ("oracle", NMAX, 1)]:
    c = fixed_curve_wide if key[0] == "fixed" else curves[key]
    cells = []
    for t in targets:
        il, ic = interp(c, t)
        cells.append(f"{il:5.1f} ({ic / interp(fixed_curve_wide, t)[1]:.3f})")
    print(f"  {key[0]:6s} cap {key[1]:3d} floor {key[2]:2d}: " + "  ".join(cells))

if "--engine-check" in sys.argv:
    import vdbbench as vb
    idx = vb.IvfIndex.load(path)
    qh = Q[held]
    print("\nengine check (held out, real search, rerank 0):")
    for n in (fixed_pick - 2, fixed_pick, fixed_pick + 2):
        _, I = idx.search(qh, k=10, nprobe=n, rerank=0)
        real = knn_recall_per_query(I, base, qh, ds.distances[held]).mean()
        print(f"  fixed nprobe {n}: engine {real:.4f}, simulation {evaluate(rule('fixed', 0, n), held)[0]:.4f}")
    for r in rows[:3] + rows2[:1]:
        n = r[8]
        I = np.empty((len(held), 10), np.int64)
        for j, i in enumerate(held):
            I[j] = idx.search(Q[i:i + 1], k=10, nprobe=int(n[i]), rerank=0, threads=1)[1][0]
        real = knn_recall_per_query(I, base, qh, ds.distances[held]).mean()
        print(f"  {r[1]} cap {r[2]} floor {r[3]} eps {r[4]:.3f}: engine {real:.4f}, simulation "
              f"{r[6][0]:.4f}, mean lists {n[held].mean():.2f}")
