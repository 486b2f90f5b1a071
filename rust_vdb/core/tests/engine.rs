//! Engine behaviour tests: k-means determinism, IVF vs Flat exactness, persistence safety.

use vdb_core::error::never_interrupt;
use vdb_core::kmeans::{self, KMeansParams};
use vdb_core::rng::Rng;
use vdb_core::{FlatIndex, IvfIndex, Metric, Storage, Tuning, VdbError};

/// Clustered float data: `n` rows of `dim` around `centers` Gaussian-ish blobs.
fn blobs(n: usize, dim: usize, centers: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut gauss = move || {
        // Irwin-Hall(12) - 6: close enough to N(0, 1) for test data.
        (0..12).map(|_| rng.next_f64()).sum::<f64>() as f32 - 6.0
    };
    let c: Vec<f32> = (0..centers * dim).map(|_| 4.0 * gauss()).collect();
    let mut out = Vec::with_capacity(n * dim);
    let mut pick = Rng::new(seed ^ 0xABCD);
    for _ in 0..n {
        let j = pick.below(centers);
        for d in 0..dim {
            out.push(c[j * dim + d] + gauss());
        }
    }
    out
}

fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn kmeans_is_identical_at_any_thread_count_and_leaves_no_empty_cluster() {
    let dim = 16;
    let x = blobs(3000, dim, 12, 1);
    let mut p = KMeansParams::new(40, 7);
    p.niter = 8;
    let mut runs = Vec::new();
    for t in [1usize, 2, 3] {
        let mut p = p.clone();
        p.threads = Some(t);
        runs.push(in_pool(t, || {
            kmeans::kmeans(&x, dim, &p, &never_interrupt).unwrap()
        }));
    }
    assert_eq!(runs[0].centroids, runs[1].centroids);
    assert_eq!(runs[0].centroids, runs[2].centroids);
    assert_eq!(runs[0].objective, runs[1].objective);

    // Every cluster gets points on the training set.
    let c = &runs[0].centroids;
    let norms = kmeans::row_norms(c, dim);
    let n = x.len() / dim;
    let (mut a, mut s) = (vec![0u32; n], vec![0f32; n]);
    kmeans::assign(None, &x, c, &norms, dim, false, &mut a, &mut s).unwrap();
    let mut counts = vec![0usize; 40];
    a.iter().for_each(|&i| counts[i as usize] += 1);
    assert!(counts.iter().all(|&c| c > 0), "empty cluster: {counts:?}");

    // A different seed gives different centroids.
    let mut p2 = p.clone();
    p2.seed = 8;
    assert_ne!(
        kmeans::kmeans(&x, dim, &p2, &never_interrupt)
            .unwrap()
            .centroids,
        runs[0].centroids
    );
}

#[test]
fn kmeans_over_neighbours_is_identical_at_any_thread_count_and_as_good_as_scoring_all() {
    // 8 neighbours of 64 centroids: every iteration after the first scores only those.
    let dim = 8;
    let x = blobs(6000, dim, 30, 21);
    let mut p = KMeansParams::new(64, 5);
    p.niter = 12;
    p.tol = 0.0;
    p.neighbours = 8;
    let runs: Vec<_> = [1usize, 2]
        .into_iter()
        .map(|t| {
            let mut p = p.clone();
            p.threads = Some(t);
            in_pool(t, || kmeans::kmeans(&x, dim, &p, &never_interrupt).unwrap())
        })
        .collect();
    assert_eq!(runs[0].centroids, runs[1].centroids);
    assert_eq!(runs[0].objective, runs[1].objective);
    // No point moves to a farther centroid: the objective never rises.
    let obj = &runs[0].objective;
    assert!(
        obj.windows(2).all(|w| w[1] <= w[0] * (1.0 + 1e-6)),
        "{obj:?}"
    );
    // Within 1% of k-means scoring every centroid, from the same seeding.
    let mut all = p.clone();
    all.neighbours = 0;
    let full = kmeans::kmeans(&x, dim, &all, &never_interrupt).unwrap();
    let (a, b) = (*obj.last().unwrap(), *full.objective.last().unwrap());
    assert!(a <= b * 1.01, "neighbours {a} vs all {b}");
    // The first iteration scores every centroid in both.
    assert_eq!(obj[0], full.objective[0]);
    // With one neighbour (its own centroid) no point ever moves after the first assignment:
    // the clusters, so the objective, stay as the second iteration left them.
    let mut own = p.clone();
    own.neighbours = 1;
    let stuck = kmeans::kmeans(&x, dim, &own, &never_interrupt)
        .unwrap()
        .objective;
    assert!(stuck[2..].iter().all(|&o| o == stuck[1]), "{stuck:?}");
    assert!(
        *full.objective.last().unwrap() < stuck[1],
        "{:?}",
        full.objective
    );
}

#[test]
fn a_large_add_assigns_nearly_every_vector_to_its_nearest_list() {
    // 2048 lists and 8 vectors per list or more: `add` assigns through the routing groups.
    let dim = 8;
    let nlist = 2048;
    let x = blobs(20_000, dim, 200, 31);
    let mut ivf = IvfIndex::new(dim, Some(nlist), Metric::L2, Storage::U8F16, 0).unwrap();
    ivf.train(&x, None, &never_interrupt).unwrap();
    ivf.add(&x, None, None, &never_interrupt).unwrap();
    let c = ivf.centroids();
    let norms = kmeans::row_norms(c, dim);
    let n = x.len() / dim;
    let (mut exact, mut s) = (vec![0u32; n], vec![0f32; n]);
    kmeans::assign(None, &x, c, &norms, dim, false, &mut exact, &mut s).unwrap();
    let mut got = vec![u32::MAX; n];
    for (li, l) in ivf.lists().iter().enumerate() {
        for id in l.ids.iter() {
            got[id as usize] = li as u32;
        }
    }
    assert!(got.iter().all(|&l| l != u32::MAX), "a vector is in no list");
    let d2 = |i: usize, l: u32| -> f32 {
        let (p, q) = (
            &x[i * dim..(i + 1) * dim],
            &c[l as usize * dim..(l as usize + 1) * dim],
        );
        p.iter().zip(q).map(|(a, b)| (a - b) * (a - b)).sum()
    };
    let same = (0..n).filter(|&i| got[i] == exact[i]).count();
    let (mut cost, mut best) = (0f64, 0f64);
    for i in 0..n {
        cost += d2(i, got[i]) as f64;
        best += d2(i, exact[i]) as f64;
    }
    assert!(
        same as f64 >= 0.97 * n as f64,
        "{same} of {n} in their nearest list"
    );
    assert!(
        cost <= best * 1.005,
        "assignment cost {cost} vs exact {best}"
    );
}

#[test]
fn kmeans_splits_clusters_when_data_has_fewer_modes_than_k() {
    // 4 distinct points repeated, plus a little spread: k=16 must still give 16 used lists.
    let dim = 4;
    let mut rng = Rng::new(3);
    let x: Vec<f32> = (0..800 * dim)
        .map(|i| ((i / dim) % 4) as f32 * 10.0 + rng.next_f64() as f32)
        .collect();
    let mut p = KMeansParams::new(16, 0);
    p.niter = 5;
    let km = kmeans::kmeans(&x, dim, &p, &never_interrupt).unwrap();
    let norms = kmeans::row_norms(&km.centroids, dim);
    let (mut a, mut s) = (vec![0u32; 800], vec![0f32; 800]);
    kmeans::assign(None, &x, &km.centroids, &norms, dim, false, &mut a, &mut s).unwrap();
    let mut counts = vec![0usize; 16];
    a.iter().for_each(|&i| counts[i as usize] += 1);
    assert!(counts.iter().all(|&c| c > 0), "empty cluster: {counts:?}");
}

fn search_flat(
    base: &[f32],
    q: &[f32],
    dim: usize,
    metric: Metric,
    k: usize,
) -> (Vec<f32>, Vec<i64>) {
    let mut f = FlatIndex::new(dim, metric).unwrap();
    f.add(base).unwrap();
    let (d, i, _) = f.search(q, k, None, &never_interrupt).unwrap();
    (d, i)
}

#[test]
fn ivf_f32_with_every_list_probed_equals_flat_exactly() {
    let dim = 24;
    let base = blobs(2000, dim, 10, 11);
    let q = blobs(50, dim, 10, 12);
    for metric in [Metric::L2, Metric::Ip, Metric::Cosine] {
        let mut ivf = IvfIndex::new(dim, Some(20), metric, Storage::F32, 0).unwrap();
        ivf.train(&base, None, &never_interrupt).unwrap();
        ivf.add(&base, None, None, &never_interrupt).unwrap();
        let (d, i, stats) = ivf
            .search(&q, 10, Some(20), None, None, &never_interrupt)
            .unwrap();
        let (fd, fi) = search_flat(&base, &q, dim, metric, 10);
        assert_eq!(i, fi, "{metric:?}");
        // The SIMD batch kernels score rows four at a time, so one row's rounding may depend
        // on its position in the block: equal up to f32 rounding (exact on integer data).
        for (a, b) in d.iter().zip(&fd) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                "{metric:?}: {a} vs {b}"
            );
        }
        assert_eq!(stats.codes_scanned, 50 * 2000);
        // Single-threaded and one-query calls give the same rows.
        let (d1, i1, _) = ivf
            .search(&q, 10, Some(20), None, Some(1), &never_interrupt)
            .unwrap();
        assert_eq!((d1, i1), (d.clone(), i.clone()));
        let (d2, i2, _) = ivf
            .search(&q[..dim], 10, Some(20), None, None, &never_interrupt)
            .unwrap();
        assert_eq!((&d2[..], &i2[..]), (&d[..10], &i[..10]));
    }
}

#[test]
fn ivf_train_is_deterministic_across_thread_counts() {
    let dim = 16;
    let base = blobs(3000, dim, 12, 5);
    let q = blobs(20, dim, 12, 6);
    let build = |t: usize| {
        let mut ivf = IvfIndex::new(dim, None, Metric::L2, Storage::U8F16, 42).unwrap();
        ivf.train(&base, Some(t), &never_interrupt).unwrap();
        ivf.add(&base, None, Some(t), &never_interrupt).unwrap();
        let r = ivf
            .search(&q, 5, Some(4), Some(20), Some(t), &never_interrupt)
            .unwrap();
        (ivf.centroids().to_vec(), r.0, r.1)
    };
    assert_eq!(build(1), build(2));
}

#[test]
fn bad_inputs_are_refused_and_leave_the_index_unchanged() {
    let dim = 8;
    let base = blobs(500, dim, 4, 9);
    let mut ivf = IvfIndex::new(dim, Some(8), Metric::L2, Storage::U8F16, 0).unwrap();
    assert!(matches!(
        ivf.add(&base, None, None, &never_interrupt),
        Err(VdbError::NotReady(_))
    ));
    assert!(matches!(
        ivf.search(&base[..dim], 1, None, None, None, &never_interrupt),
        Err(VdbError::NotReady(_))
    ));
    ivf.train(&base, None, &never_interrupt).unwrap();
    ivf.add(&base, None, None, &never_interrupt).unwrap();
    let before = ivf.clone().lists().to_vec();
    let mut bad = base[..dim * 3].to_vec();
    bad[5] = f32::NAN;
    assert!(matches!(
        ivf.add(&bad, None, None, &never_interrupt),
        Err(VdbError::InvalidInput(_))
    ));
    assert!(matches!(
        ivf.add(&base[..dim * 2], Some(&[1, -2]), None, &never_interrupt),
        Err(VdbError::InvalidInput(_))
    ));
    assert!(matches!(
        ivf.add(&base[..dim * 2], Some(&[1]), None, &never_interrupt),
        Err(VdbError::InvalidInput(_))
    ));
    assert_eq!(ivf.lists(), &before[..]);
    assert_eq!(ivf.ntotal(), 500);
    let q = &base[..dim];
    for (k, nprobe, rerank) in [
        (0, None, None),
        (501, None, None),
        (5, Some(0), None),
        (5, Some(9), None),
        (5, None, Some(3)),
    ] {
        let e = ivf
            .search(q, k, nprobe, rerank, None, &never_interrupt)
            .unwrap_err();
        assert!(
            matches!(e, VdbError::InvalidInput(_)),
            "{k} {nprobe:?} {rerank:?}: {e}"
        );
    }
    let e = ivf
        .search(q, 5, None, None, Some(0), &never_interrupt)
        .unwrap_err();
    assert!(e.to_string().contains("threads=0"), "{e}");
    let e = ivf
        .search(&base[..dim + 1], 5, None, None, None, &never_interrupt)
        .unwrap_err();
    assert!(e.to_string().contains("dim=8"), "{e}");
}

#[test]
fn persist_round_trip_and_refusals() {
    let dim = 12;
    let base = blobs(1500, dim, 6, 21);
    let q = blobs(30, dim, 6, 22);
    let dir = std::env::temp_dir().join(format!("vdb-persist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for storage in [Storage::F32, Storage::F16, Storage::U8F16] {
        let mut ivf = IvfIndex::new(dim, None, Metric::Cosine, storage, 3).unwrap();
        ivf.train(&base, None, &never_interrupt).unwrap();
        let ids: Vec<i64> = (0..1500).map(|i| 10_000 + 3 * i).collect();
        ivf.add(&base, Some(&ids), None, &never_interrupt).unwrap();
        let path = dir.join(format!("{}.vdb", storage.name().replace('+', "_")));
        vdb_core::persist::save(&ivf, &path).unwrap();
        let back = vdb_core::persist::load(&path).unwrap();
        let a = ivf
            .search(&q, 7, Some(5), None, None, &never_interrupt)
            .unwrap();
        let b = back
            .search(&q, 7, Some(5), None, None, &never_interrupt)
            .unwrap();
        assert_eq!((a.0, a.1), (b.0, b.1));
        assert_eq!(back.bytes(), ivf.bytes());
        assert_eq!(back.nlist(), ivf.nlist());

        let bytes = std::fs::read(&path).unwrap();
        let bad = dir.join("bad.vdb");
        // Truncated at several places.
        for cut in [0, 5, 20, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&bad, &bytes[..cut]).unwrap();
            let e = vdb_core::persist::load(&bad).unwrap_err();
            assert!(matches!(e, VdbError::CorruptFile(_)), "cut {cut}: {e}");
        }
        // One flipped byte in the payload fails the checksum.
        let mut flipped = bytes.clone();
        flipped[bytes.len() / 2] ^= 0x40;
        std::fs::write(&bad, &flipped).unwrap();
        let e = vdb_core::persist::load(&bad).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        // A foreign file.
        std::fs::write(&bad, b"\x89HDF\r\n\x1a\n not an index at all").unwrap();
        let e = vdb_core::persist::load(&bad).unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
        // A failed save (directory missing) leaves no file behind and an existing one intact.
        assert!(vdb_core::persist::save(&ivf, &dir.join("missing/x.vdb")).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn one_query_on_several_threads_equals_one_thread_for_every_storage_and_metric() {
    // 20000 vectors in 12 lists, every list probed: each query scans well over the split
    // threshold, so threads=2 and 3 share its lists (and threads=None uses rayon's pool).
    let dim = 24;
    let base = blobs(20000, dim, 30, 11);
    let mut shared = 0;
    let queries = blobs(40, dim, 30, 12);
    for metric in [Metric::L2, Metric::Ip, Metric::Cosine] {
        for storage in [Storage::U8F16, Storage::F16, Storage::F32] {
            let mut ivf = IvfIndex::new(dim, Some(12), metric, storage, 5).unwrap();
            ivf.train(&base, Some(1), &never_interrupt).unwrap();
            ivf.add(&base, None, Some(1), &never_interrupt).unwrap();
            // with the 4-bit prefilter (u8 l2 only) a query stays on the calling thread
            let prefilter = metric == Metric::L2 && storage == Storage::U8F16;
            let reorders: &[Option<usize>] = if prefilter { &[None, Some(40)] } else { &[None] };
            for (rerank, &reorder) in [Some(0), Some(40), None].into_iter().flat_map(|r| reorders.iter().map(move |o| (r, o))) {
                for q in queries.chunks_exact(dim) {
                    let one = ivf
                        .search_with(q, 10, Some(12), rerank, Tuning::reorder(reorder), Some(1), &never_interrupt)
                        .unwrap();
                    assert_eq!(one.2.threads, 1);
                    for threads in [Some(2), Some(3), None] {
                        let many = ivf
                            .search_with(q, 10, Some(12), rerank, Tuning::reorder(reorder), threads, &never_interrupt)
                            .unwrap();
                        assert_eq!(
                            (&one.0, &one.1),
                            (&many.0, &many.1),
                            "{metric:?} {storage:?} {rerank:?} {reorder:?} {threads:?}"
                        );
                        if reorder.is_some() {
                            assert_eq!(many.2.threads, 1);
                        }
                        assert!((1..=3).contains(&many.2.threads), "{:?}", many.2.threads);
                        shared += (many.2.threads > 1) as usize;
                        assert_eq!(one.2.codes_scanned, many.2.codes_scanned);
                    }
                }
            }
        }
    }
    // A helper that starts after the caller finished is abandoned; most calls get one. On a
    // single core there are no helpers (a spinning one would only steal the caller's core).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        shared > 0 || cores == 1,
        "no call was ever shared between threads"
    );
}

#[test]
fn run_shared_hands_out_every_item_once_whoever_runs() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use vdb_core::pool::run_shared;
    // Items pulled from a shared counter are each taken exactly once, whoever takes them.
    for _ in 0..200 {
        let next = AtomicUsize::new(0);
        let work = || {
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= 64 {
                    break;
                }
                mine.push(i);
            }
            mine
        };
        let runs = run_shared(2, &work);
        assert!((1..=3).contains(&runs.len()));
        let mut all: Vec<usize> = runs.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..64).collect::<Vec<_>>());
    }
    // A helper's panic reaching its caller is tested where the helpers are (pool.rs): there
    // the tests run one at a time and can make sure a helper is free and sharing is on.
}

#[test]
fn batches_over_blocks_and_threads_equal_one_query_at_a_time() {
    // 600 lists (two-level routing groups exist), 1500 queries: two blocks at one thread,
    // two threads, against one query per call.
    let dim = 8;
    let base = blobs(12_000, dim, 50, 21);
    let queries = blobs(1500, dim, 50, 22);
    for metric in [Metric::L2, Metric::Cosine] {
        let mut ivf = IvfIndex::new(dim, Some(600), metric, Storage::U8F16, 2).unwrap();
        ivf.train(&base, None, &never_interrupt).unwrap();
        ivf.add(&base, None, None, &never_interrupt).unwrap();
        for threads in [Some(1), Some(2)] {
            let (d, i, st) = ivf
                .search(&queries, 10, Some(8), Some(30), threads, &never_interrupt)
                .unwrap();
            assert_eq!(st.nq, 1500);
            for (r, q) in queries.chunks_exact(dim).enumerate().step_by(7) {
                let (d1, i1, _) = ivf
                    .search(q, 10, Some(8), Some(30), Some(1), &never_interrupt)
                    .unwrap();
                assert_eq!(
                    &i[r * 10..(r + 1) * 10],
                    &i1[..],
                    "{metric:?} {threads:?} row {r}"
                );
                assert_eq!(
                    &d[r * 10..(r + 1) * 10],
                    &d1[..],
                    "{metric:?} {threads:?} row {r}"
                );
            }
        }
    }
}

#[test]
fn probe_ratio_probes_fewer_lists_the_same_in_batch_and_alone_and_every_list_when_wide() {
    // 600 lists route in two levels, 100 score every centroid; L2 and cosine distances.
    let dim = 8;
    let base = blobs(12_000, dim, 50, 21);
    let queries = blobs(300, dim, 50, 22);
    let nq = queries.len() / dim;
    let tuning = |probe_ratio, reorder| Tuning {
        reorder,
        probe_ratio,
    };
    for metric in [Metric::L2, Metric::Cosine] {
        for nlist in [600, 100] {
            let mut ivf = IvfIndex::new(dim, Some(nlist), metric, Storage::U8F16, 2).unwrap();
            ivf.train(&base, None, &never_interrupt).unwrap();
            ivf.add(&base, None, None, &never_interrupt).unwrap();
            let run = |qs: &[f32], ratio, reorder, threads| {
                ivf.search_with(qs, 10, Some(16), Some(30), tuning(ratio, reorder), threads, &never_interrupt)
                    .unwrap()
            };
            let at = format!("{metric:?} nlist {nlist}");
            // A ratio no centroid lies beyond probes all nprobe lists: the same results.
            let (d0, i0, s0) = run(&queries, None, None, Some(1));
            let (dw, iw, sw) = run(&queries, Some(1e6), None, Some(1));
            assert_eq!((&d0, &i0), (&dw, &iw), "{at}");
            assert_eq!((s0.lists_probed, sw.lists_probed), (nq as u64 * 16, nq as u64 * 16), "{at}");
            // Ratio 1 keeps the nearest list only, raised to the floor of a quarter of nprobe.
            let (_, _, s1) = run(&queries, Some(1.0), None, Some(1));
            assert_eq!(s1.lists_probed, nq as u64 * 4, "{at}");
            // the 4-bit prefilter exists for "l2" only (cosine refuses a reorder)
            let reorders: &[Option<usize>] = if metric == Metric::L2 { &[None, Some(40)] } else { &[None] };
            for &reorder in reorders {
                let (d, i, st) = run(&queries, Some(1.3), reorder, Some(2));
                let probed = st.lists_probed;
                assert!(probed > nq as u64 * 4 && probed < nq as u64 * 16, "{at}: {probed}");
                for (r, q) in queries.chunks_exact(dim).enumerate().step_by(7) {
                    let (d1, i1, _) = run(q, Some(1.3), reorder, Some(1));
                    let one = r * 10..(r + 1) * 10;
                    assert_eq!((&i[one.clone()], &d[one]), (&i1[..], &d1[..]), "{at} {reorder:?} row {r}");
                }
            }
        }
    }
    // Refused: ratios below 1 or not finite, and any ratio on "ip" (it has no distance).
    let mut ivf = IvfIndex::new(dim, Some(20), Metric::L2, Storage::U8F16, 2).unwrap();
    ivf.train(&base, None, &never_interrupt).unwrap();
    ivf.add(&base, None, None, &never_interrupt).unwrap();
    // One query on two threads (20 lists of ~600 rows: the u8 scan shares them between the
    // threads) probes the lists it probes on one, with the same results.
    for q in queries.chunks_exact(dim).step_by(13) {
        let at = |threads| {
            ivf.search_with(q, 10, Some(16), Some(30), tuning(Some(1.3), None), threads, &never_interrupt)
                .unwrap()
        };
        let (one, two) = (at(Some(1)), at(Some(2)));
        assert_eq!((&one.0, &one.1, one.2.lists_probed), (&two.0, &two.1, two.2.lists_probed));
        assert!(one.2.lists_probed < 16);
    }
    for bad in [0.5, -1.0, f32::NAN, f32::INFINITY] {
        let e = ivf
            .search_with(&queries[..dim], 10, Some(4), None, tuning(Some(bad), None), None, &never_interrupt)
            .unwrap_err();
        assert!(e.to_string().contains("probe_ratio"), "{bad}: {e}");
    }
    let off = ivf.search_with(&queries[..dim], 10, Some(4), None, tuning(Some(0.0), None), None, &never_interrupt);
    assert_eq!(off.unwrap().2.lists_probed, 4);
    let mut ip = IvfIndex::new(dim, Some(20), Metric::Ip, Storage::U8F16, 2).unwrap();
    ip.train(&base, None, &never_interrupt).unwrap();
    ip.add(&base, None, None, &never_interrupt).unwrap();
    let e = ip
        .search_with(&queries[..dim], 10, Some(4), None, tuning(Some(1.2), None), None, &never_interrupt)
        .unwrap_err();
    assert!(e.to_string().contains("'ip'"), "{e}");
}

#[test]
fn query_tiles_of_a_block_equal_one_query_at_a_time_on_u8_codes() {
    // Few lists and many probes: each list is probed by ~300 queries of a block, so the batch
    // prescore scores full tiles of queries, leftovers above and below its tile minimum, and
    // (two threads) smaller blocks. Rerank 0: the u8 distances are the results. Dim 20 is
    // not a multiple of 64 (nor of 8).
    let dim = 20;
    let base = blobs(5_000, dim, 30, 31);
    let queries = blobs(1200, dim, 30, 32);
    let mut ivf = IvfIndex::new(dim, Some(40), Metric::L2, Storage::U8F16, 3).unwrap();
    ivf.train(&base, None, &never_interrupt).unwrap();
    ivf.add(&base, None, None, &never_interrupt).unwrap();
    for threads in [Some(1), Some(2)] {
        let (d, i, _) = ivf
            .search(&queries, 10, Some(10), Some(0), threads, &never_interrupt)
            .unwrap();
        for (r, q) in queries.chunks_exact(dim).enumerate() {
            let (d1, i1, _) = ivf
                .search(q, 10, Some(10), Some(0), Some(1), &never_interrupt)
                .unwrap();
            assert_eq!(&i[r * 10..(r + 1) * 10], &i1[..], "{threads:?} row {r}");
            assert_eq!(&d[r * 10..(r + 1) * 10], &d1[..], "{threads:?} row {r}");
        }
    }
}

#[test]
fn split_u8_codes_give_the_exact_distances_of_whole_codes_in_every_path() {
    // Integer data in 0..=255: u8 codes are exact, so with every list probed and no rerank
    // the u8 prescore is the exact search. dim 40 and 64 split into a 16- / 32-dim head and a
    // tail; every path (batch tiles, one query, one query on two threads, a loaded copy)
    // must give Flat's ids and distances.
    for dim in [40usize, 64] {
        let mut rng = Rng::new(dim as u64);
        let base: Vec<f32> = (0..3000 * dim).map(|_| rng.below(256) as f32).collect();
        let q: Vec<f32> = (0..40 * dim).map(|_| rng.below(256) as f32).collect();
        let mut ivf = IvfIndex::new(dim, Some(16), Metric::L2, Storage::U8F16, 0).unwrap();
        ivf.train(&base, None, &never_interrupt).unwrap();
        ivf.add(&base, None, None, &never_interrupt).unwrap();
        let split = ivf
            .code_split()
            .expect("an l2 u8+f16 index of 32+ dims splits its codes");
        assert_eq!(split.head, dim / 2 / 16 * 16);
        let (fd, fi) = search_flat(&base, &q, dim, Metric::L2, 10);
        let path = std::env::temp_dir().join(format!("vdb-split-{dim}-{}.vdb", std::process::id()));
        vdb_core::persist::save(&ivf, &path).unwrap();
        let loaded = vdb_core::persist::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(loaded.code_split().is_some());
        for idx in [&ivf, &loaded] {
            let (d, i, _) = idx
                .search(&q, 10, Some(16), Some(0), Some(1), &never_interrupt)
                .unwrap();
            assert_eq!(i, fi, "dim {dim}: batch");
            assert_eq!(d, fd, "dim {dim}: batch");
            for (j, qr) in q.chunks_exact(dim).enumerate() {
                for threads in [1, 2] {
                    let (d1, i1, _) = in_pool(2, || {
                        idx.search(qr, 10, Some(16), Some(0), Some(threads), &never_interrupt)
                    })
                    .unwrap();
                    assert_eq!(
                        &i1[..],
                        &fi[j * 10..(j + 1) * 10],
                        "dim {dim} query {j} threads {threads}"
                    );
                    assert_eq!(&d1[..], &fd[j * 10..(j + 1) * 10], "dim {dim} query {j}");
                }
            }
        }
    }
}

#[test]
fn ids_past_u32_widen_their_lists_and_survive_a_save() {
    // Ids 0..n are stored in four bytes; one beyond u32 (here 2^40 + i for the odd rows)
    // widens the lists it lands in, and searches, saves and loads give the same ids back.
    let dim = 16;
    let base = blobs(3000, dim, 20, 41);
    let n = base.len() / dim;
    let ids: Vec<i64> = (0..n as i64)
        .map(|i| {
            if i % 2 == 1 {
                (1 << 40) + i
            } else {
                u32::MAX as i64 - i
            }
        })
        .collect();
    let mut ivf = IvfIndex::new(dim, Some(16), Metric::L2, Storage::U8F16, 5).unwrap();
    ivf.train(&base, None, &never_interrupt).unwrap();
    ivf.add(&base, Some(&ids), None, &never_interrupt).unwrap();
    let mut narrow = IvfIndex::new(dim, Some(16), Metric::L2, Storage::U8F16, 5).unwrap();
    narrow.train(&base, None, &never_interrupt).unwrap();
    narrow.add(&base, None, None, &never_interrupt).unwrap();
    assert!(
        ivf.bytes() > narrow.bytes() + n * 4 - 16,
        "wide ids take 8 bytes"
    );
    let mut all: Vec<i64> = ivf.lists().iter().flat_map(|l| l.ids.iter()).collect();
    all.sort_unstable();
    let mut want = ids.clone();
    want.sort_unstable();
    assert_eq!(all, want);
    let path = std::env::temp_dir().join(format!("vdb-wide-ids-{}.vdb", std::process::id()));
    vdb_core::persist::save(&ivf, &path).unwrap();
    let loaded = vdb_core::persist::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let q = &base[..10 * dim];
    let (d0, i0, _) = ivf
        .search(q, 5, Some(16), Some(0), Some(1), &never_interrupt)
        .unwrap();
    let (d1, i1, _) = loaded
        .search(q, 5, Some(16), Some(0), Some(1), &never_interrupt)
        .unwrap();
    assert_eq!((d0.clone(), i0.clone()), (d1, i1));
    // every query is a base row: its own id comes first (distance 0 on u8 codes of itself)
    for (r, row) in i0.chunks_exact(5).enumerate() {
        assert_eq!(row[0], ids[r], "query {r}");
    }
    assert!(i0.iter().any(|&i| i >= 1 << 40) && i0.iter().any(|&i| i < 1 << 32));
}

#[test]
fn prefilter_keeping_every_row_equals_the_u8_scan_and_survives_save_and_a_version_1_file() {
    let (dim, n) = (16, 3000);
    // integer values, as SIFT's: the u8 codes are exact
    let base: Vec<f32> = blobs(n, dim, 8, 41).iter().map(|v| (v * 4.0).round()).collect();
    let q: Vec<f32> = blobs(40, dim, 8, 42).iter().map(|v| (v * 4.0).round() + 0.25).collect();
    let mut ivf = IvfIndex::new(dim, Some(8), Metric::L2, Storage::U8F16, 5).unwrap();
    ivf.train(&base, None, &never_interrupt).unwrap();
    ivf.add(&base[..1000 * dim], None, None, &never_interrupt).unwrap();
    ivf.add(&base[1000 * dim..], None, None, &never_interrupt).unwrap();
    let one = |ix: &IvfIndex, reorder: Option<usize>| -> (Vec<f32>, Vec<i64>) {
        let (mut d, mut i) = (Vec::new(), Vec::new());
        for qq in q.chunks_exact(dim) {
            let r = ix.search_with(qq, 10, Some(3), Some(0), Tuning::reorder(reorder), Some(1), &never_interrupt).unwrap();
            d.extend(r.0);
            i.extend(r.1);
        }
        (d, i)
    };
    let exact = one(&ivf, None);
    // every row of the probed lists kept: the u8 scan's very results
    assert_eq!(one(&ivf, Some(n)), exact);
    // a real cut still finds most of them
    let cut = one(&ivf, Some(40));
    let found = cut.1.iter().filter(|id| exact.1.contains(id)).count();
    assert!(found * 10 >= exact.1.len() * 8, "{found} of {}", exact.1.len());
    // several queries in one call, on one thread or several: the same results as one by one
    for threads in [Some(1), Some(3)] {
        let batch = ivf.search_with(&q, 10, Some(3), Some(0), Tuning::reorder(Some(40)), threads, &never_interrupt).unwrap();
        assert_eq!((batch.0, batch.1), cut);
        let all = ivf.search_with(&q, 10, Some(3), Some(0), Tuning::reorder(Some(n)), threads, &never_interrupt).unwrap();
        assert_eq!((all.0, all.1), exact);
    }
    // below k is refused
    let e = ivf.search_with(&q[..dim], 10, Some(3), Some(0), Tuning::reorder(Some(9)), None, &never_interrupt).unwrap_err();
    assert!(e.to_string().contains("reorder=9"), "{e}");

    let dir = std::env::temp_dir().join(format!("vdb-prefilter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("v2.vdb");
    vdb_core::persist::save(&ivf, &path).unwrap();
    let back = vdb_core::persist::load(&path).unwrap();
    assert_eq!(one(&back, Some(40)), cut);
    assert_eq!(back.bytes(), ivf.bytes());

    // The same file as version 1 wrote it (no prefilter section): it loads with a prefilter
    // trained on its codes, and keeping every row still gives the u8 scan's results.
    let bytes = std::fs::read(&path).unwrap();
    let header = 8 + 4 + 4 + 4 + 4 * 8;
    let at = header + 8 * dim * 4 + 2 * dim * 4;
    assert_eq!(bytes[at], 1, "the prefilter flag");
    let pq_len = dim / 2 * 16 * 2 * 4;
    let mut v1 = bytes[..at].to_vec();
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&bytes[at + 1 + pq_len..bytes.len() - 4]);
    let crc = crc32fast::hash(&v1);
    v1.extend_from_slice(&crc.to_le_bytes());
    let old = dir.join("v1.vdb");
    std::fs::write(&old, &v1).unwrap();
    let back1 = vdb_core::persist::load(&old).unwrap();
    assert_eq!(one(&back1, Some(n)), exact);
    let cut1 = one(&back1, Some(40));
    assert!(cut1.1.iter().filter(|id| exact.1.contains(id)).count() * 10 >= exact.1.len() * 8);
    // a version this build does not know is refused
    let mut v9 = bytes.clone();
    v9[8..12].copy_from_slice(&9u32.to_le_bytes());
    std::fs::write(&old, &v9).unwrap();
    let e = vdb_core::persist::load(&old).unwrap_err();
    assert!(e.to_string().contains("format version 9"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
