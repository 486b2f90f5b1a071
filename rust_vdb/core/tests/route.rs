//! Routing: which lists a query probes (flat, two-level over f16 centroids, two-level over u8
//! codes, tiles of queries), and the key helpers its selections rely on.

use half::f16;
use vdb_core::error::never_interrupt;
use vdb_core::kernels::{available_tables, kernels, Kernels};
use vdb_core::kmeans::{kmeans, row_norms, KMeansParams};
use vdb_core::quant::Sq8;
use vdb_core::rng::Rng;
use vdb_core::route::{
    keep_best, keep_smallest, key_pair, pair_key, RouteBufs, SuperRouting, GROUP_BLOCK, MIN_NLIST,
};
use vdb_core::Metric;

fn centroids(n: usize, dim: usize) -> Vec<f32> {
    let mut rng = Rng::new(9);
    (0..n * dim)
        .map(|_| f16::from_f32(rng.next_f64() as f32 * 10.0).to_f32())
        .collect()
}

#[test]
fn small_indexes_route_flat_and_large_searches_too() {
    assert!(SuperRouting::build(&centroids(MIN_NLIST - 1, 8), 8, 0, None).is_none());
    // 4000 lists: default nprobe 64, so 16 x 64 = 1024 candidates up to nprobe 64.
    assert_eq!(SuperRouting::want(10, 4000), 1024);
    assert_eq!(SuperRouting::want(100, 4000), 1600);
    assert!(SuperRouting::applies(10, 4000));
    assert!(!SuperRouting::applies(200, 4000));
    // 600 lists: default nprobe 32, 512 candidates of 600: every centroid is scored.
    assert!(!SuperRouting::applies(1, 600));
}

#[test]
fn every_list_is_in_one_group_and_enough_candidates_are_scored() {
    let (n, dim) = (900, 8);
    let c = centroids(n, dim);
    let r = SuperRouting::build(&c, dim, 1, None).unwrap();
    assert_eq!(r.groups(), 30);
    let mut seen = r.grouping().3.to_vec();
    seen.sort_unstable();
    assert_eq!(seen, (0..n as u32).collect::<Vec<_>>());
    let kern = kernels();
    let (mut g, mut d, mut order) = (vec![], vec![], vec![]);
    for want in [1, 50, 300, n] {
        let scored = r.candidates(kern, &c[..dim], want, false, &mut g, &mut d, &mut order);
        assert!(order.len() >= want.min(n), "{} < {want}", order.len());
        assert_eq!(scored, order.len() + 30);
        // Each candidate's score is its flat routing score (||c||^2 - 2 <q, c>).
        for &(s, li) in &order {
            let row = &c[li as usize * dim..(li as usize + 1) * dim];
            let flat: f32 = row.iter().map(|v| v * v).sum::<f32>()
                - 2.0 * row.iter().zip(&c[..dim]).map(|(a, b)| a * b).sum::<f32>();
            assert!(
                (s - flat).abs() <= 1e-3 * flat.abs().max(1.0),
                "{s} vs {flat}"
            );
        }
    }
    // The query's own centroid (list 0) is found by its nearest group.
    r.candidates(kern, &c[..dim], 1, false, &mut g, &mut d, &mut order);
    assert!(order.iter().any(|&(_, li)| li == 0));
}

/// Flat routing's nprobe best lists for q: (score, list), best first.
fn flat(c: &[f32], norms: &[f32], q: &[f32], nprobe: usize) -> Vec<u32> {
    let dim = q.len();
    let mut all: Vec<(f32, u32)> = c
        .chunks_exact(dim)
        .zip(norms)
        .enumerate()
        .map(|(i, (row, n))| {
            (
                n - 2.0 * row.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(),
                i as u32,
            )
        })
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    all.iter().take(nprobe).map(|x| x.1).collect()
}

#[test]
fn a_small_nprobe_still_finds_the_nearest_lists() {
    // Diffuse real-valued data, where a query's nearest centroid is often outside its
    // nearest group: with 16 x nprobe candidates alone nprobe=1 found it for ~75% of the
    // queries of synth-float; the floor of 16 x the default nprobe must find nearly all.
    let (n, dim, nlist) = (12_000, 8, 1100);
    let mut rng = Rng::new(5);
    let x: Vec<f32> = (0..n * dim).map(|_| rng.next_f64() as f32 * 10.0).collect();
    let mut p = KMeansParams::new(nlist, 1);
    p.niter = 4;
    let c: Vec<f32> = kmeans(&x, dim, &p, &never_interrupt)
        .unwrap()
        .centroids
        .iter()
        .map(|&v| f16::from_f32(v).to_f32())
        .collect();
    let norms = row_norms(&c, dim);
    let r = SuperRouting::build(&c, dim, 0, None).unwrap();
    let kern = kernels();
    let (mut g, mut d, mut order) = (vec![], vec![], vec![]);
    for nprobe in [1usize, 4, 16] {
        assert!(SuperRouting::applies(nprobe, nlist));
        let (mut found, mut total) = (0, 0);
        for q in x.chunks_exact(dim).step_by(37).take(200) {
            r.candidates(
                kern,
                q,
                SuperRouting::want(nprobe, nlist),
                false,
                &mut g,
                &mut d,
                &mut order,
            );
            keep_best(&mut order, nprobe);
            let want = flat(&c, &norms, q, nprobe);
            found += want
                .iter()
                .filter(|li| order.iter().any(|o| o.1 == **li))
                .count();
            total += nprobe;
        }
        let share = found as f64 / total as f64;
        assert!(
            share >= 0.97,
            "nprobe {nprobe}: two-level routing found {share:.3} of the nearest lists"
        );
    }
}

/// Clustered data: integers 0..=120 (SIFT-like, Sq8 step 1), or those over 7 (fractional
/// step); the coarse centroids of `nlist` lists.
fn data(integral: bool, n: usize, dim: usize, nlist: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(11);
    let centres: Vec<f32> = (0..64 * dim).map(|_| rng.below(100) as f32).collect();
    let x: Vec<f32> = (0..n)
        .flat_map(|i| {
            let c = &centres[(i % 64) * dim..(i % 64 + 1) * dim];
            c.iter()
                .map(|&v| (v + rng.below(21) as f32).min(120.0))
                .collect::<Vec<_>>()
        })
        .map(|v| if integral { v } else { v / 7.0 })
        .collect();
    let mut p = KMeansParams::new(nlist, 2);
    p.niter = 4;
    let c = kmeans(&x, dim, &p, &never_interrupt).unwrap().centroids;
    (x, c.iter().map(|&v| f16::from_f32(v).to_f32()).collect())
}

#[test]
fn integer_routing_picks_the_lists_of_f16_routing() {
    let (n, dim, nlist) = (12_000, 24, 1100);
    for integral in [true, false] {
        let (x, c) = data(integral, n, dim, nlist);
        let sq = Sq8::train(&x, dim, Metric::L2);
        assert_eq!(sq.step[0] == 1.0, integral);
        let f16_route = SuperRouting::build(&c, dim, 0, None).unwrap();
        let u8_route = SuperRouting::build(&c, dim, 0, Some(&sq)).unwrap();
        for kern in available_tables() {
            let (mut b, mut g, mut d) = (RouteBufs::default(), vec![], vec![]);
            let (mut want_order, mut got) = (vec![], vec![]);
            for nprobe in [1usize, 5, 16] {
                let want = SuperRouting::want(nprobe, nlist);
                // queries: base rows, and points between two of them
                for (i, q) in x.chunks_exact(dim).step_by(41).take(150).enumerate() {
                    let q: Vec<f32> = if i % 2 == 0 {
                        q.to_vec()
                    } else {
                        let o = &x[(i * 97 % n) * dim..(i * 97 % n + 1) * dim];
                        q.iter().zip(o).map(|(a, b)| (a + b) * 0.5).collect()
                    };
                    f16_route.candidates(kern, &q, want, false, &mut g, &mut d, &mut want_order);
                    keep_best(&mut want_order, nprobe);
                    let r = u8_route.route(kern, &q, nprobe, want, false, &mut b, &mut got);
                    let lists = |o: &[(f32, u32)]| o.iter().map(|x| x.1).collect::<Vec<_>>();
                    assert_eq!(
                        lists(&got),
                        lists(&want_order),
                        "{} integral {integral} nprobe {nprobe} query {i}",
                        kern.name
                    );
                    assert!(r.scored >= want.min(nlist));
                }
                // Tiles of queries (every centroid scored at once) probe the same lists as
                // each query alone; tiles of 16, then a shorter last one.
                let qs: Vec<f32> = x
                    .chunks_exact(dim)
                    .step_by(37)
                    .take(37)
                    .flatten()
                    .copied()
                    .collect();
                for (t, tile) in qs.chunks(16 * dim).enumerate() {
                    let mut lists = Vec::new();
                    u8_route.route_tile(kern, tile, nprobe, want, &mut b, &mut got, |j, o, r| {
                        assert_eq!(r.scored, u8_route.groups() + nlist);
                        lists.push((j, o.iter().map(|x| x.1).collect::<Vec<_>>()));
                    });
                    assert_eq!(lists.len(), tile.len() / dim);
                    for (j, l) in lists {
                        let q = &tile[j * dim..(j + 1) * dim];
                        u8_route.route(kern, q, nprobe, want, false, &mut b, &mut got);
                        let alone: Vec<u32> = got.iter().map(|x| x.1).collect();
                        assert_eq!(l, alone, "{} tile {t} query {j} nprobe {nprobe}", kern.name);
                    }
                }
                // A block routed group by group (more queries than one `GROUP_BLOCK`; groups
                // scored in tiles from 1, 4 or 17 queries on, the rest query by query) probes
                // the same lists as each query alone.
                let block: Vec<f32> = x
                    .chunks_exact(dim)
                    .step_by(29)
                    .take(GROUP_BLOCK + 45)
                    .flatten()
                    .copied()
                    .collect();
                for tile_min in [1usize, 4, 17] {
                    let tk = Kernels {
                        route_tile_min: tile_min,
                        ..*kern
                    };
                    assert!(u8_route.groups_tile(&tk, false, tile_min));
                    let mut seen = Vec::new();
                    u8_route.route_groups(
                        &tk,
                        &block,
                        nprobe,
                        want,
                        &mut b,
                        &mut got,
                        |j, o, r| {
                            let lists: Vec<u32> = o.iter().map(|x| x.1).collect();
                            seen.push((j, lists, r.scored));
                        },
                    );
                    assert_eq!(seen.len(), block.len() / dim);
                    for (i, (j, l, scored)) in seen.into_iter().enumerate() {
                        assert_eq!(i, j, "queries come in order");
                        let q = &block[j * dim..(j + 1) * dim];
                        let r = u8_route.route(kern, q, nprobe, want, false, &mut b, &mut got);
                        let alone: Vec<u32> = got.iter().map(|x| x.1).collect();
                        let at = format!(
                            "{} tile_min {tile_min} query {j} nprobe {nprobe}",
                            kern.name
                        );
                        assert_eq!(l, alone, "{at}");
                        assert_eq!(scored, r.scored, "{at}");
                    }
                }
            }
        }
    }
}

#[test]
fn pair_keys_order_like_total_cmp_then_list() {
    let scores = [
        f32::NEG_INFINITY,
        -3.5,
        -1e-30,
        -0.0,
        0.0,
        1e-30,
        2.0,
        2.0,
        7.25,
        f32::INFINITY,
        f32::NAN,
        -f32::NAN,
    ];
    let mut pairs = Vec::new();
    for (i, &s) in scores.iter().enumerate() {
        pairs.push((s, (i * 7 % 5) as u32));
        pairs.push((s, 3));
    }
    for &(s, l) in &pairs {
        let (s2, l2) = key_pair(pair_key(s, l));
        assert_eq!((s2.to_bits(), l2), (s.to_bits(), l));
    }
    let mut by_pair = pairs.clone();
    by_pair.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut by_key: Vec<u64> = pairs.iter().map(|&(s, l)| pair_key(s, l)).collect();
    by_key.sort_unstable();
    let back: Vec<(u32, u32)> = by_key
        .iter()
        .map(|&k| key_pair(k))
        .map(|(s, l)| (s.to_bits(), l))
        .collect();
    let want: Vec<(u32, u32)> = by_pair.iter().map(|&(s, l)| (s.to_bits(), l)).collect();
    assert_eq!(back, want);
}

#[test]
fn keep_smallest_keeps_the_same_set_as_a_full_selection() {
    let mut rng = Rng::new(4);
    let mut tmp = Vec::new();
    for &(n, keep) in &[
        (0usize, 3usize),
        (10, 0),
        (10, 10),
        (50, 3),
        (1061, 68),
        (4000, 1),
        (3000, 200),
    ] {
        for seed in 0..20u64 {
            // distinct keys, many equal high halves (ties of the u8 distance)
            let keys: Vec<u64> = (0..n as u64)
                .map(|p| ((rng.below(300) as u64 + seed) << 32) | p)
                .collect();
            let mut want = keys.clone();
            want.sort_unstable();
            want.truncate(keep);
            let mut got = keys.clone();
            keep_smallest(&mut got, keep, &mut tmp);
            got.sort_unstable();
            assert_eq!(got, want, "n {n} keep {keep} seed {seed}");
        }
    }
    // keys in ascending order: the sampled bound is too tight, the full selection runs
    let mut got: Vec<u64> = (0..1000).collect();
    keep_smallest(&mut got, 100, &mut tmp);
    got.sort_unstable();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

#[test]
fn a_probe_ratio_keeps_the_lists_within_it_and_never_fewer_than_the_floor() {
    use vdb_core::probe_ratio::{min_probe, within_ratio};
    assert_eq!(
        (min_probe(1), min_probe(4), min_probe(48), min_probe(49)),
        (1, 1, 12, 13)
    );
    // l2: scores are ||c||^2 - 2 <q, c>; with ||q||^2 = 4 the squared distances are 1, 2, 4, 9.
    let q = [2.0f32, 0.0];
    let order = [(-3.0, 7), (-2.0, 1), (0.0, 5), (5.0, 2)];
    assert_eq!(within_ratio(&order, &q, false, 0.0, 1), 4, "off");
    assert_eq!(within_ratio(&order, &q, false, 1.0, 1), 1);
    assert_eq!(
        within_ratio(&order, &q, false, 1.5, 1),
        2,
        "a ratio of distances, not squared ones"
    );
    assert_eq!(within_ratio(&order, &q, false, 2.0, 1), 3);
    assert_eq!(within_ratio(&order, &q, false, 2.0, 4), 4, "the floor");
    assert_eq!(within_ratio(&order, &q, false, 1e9, 1), 4);
    assert_eq!(
        within_ratio(&order[..2], &q, false, 1.0, 3),
        2,
        "a floor above nprobe"
    );
    // cosine: scores are -<q, c> of unit vectors, squared distances 2 + 2 * score: 0.5, 1, 2.
    let order = [(-0.75, 0), (-0.5, 1), (0.0, 2)];
    assert_eq!(within_ratio(&order, &[1.0, 0.0], true, 1.5, 1), 2);
    assert_eq!(within_ratio(&order, &[1.0, 0.0], true, 2.0, 1), 3);
}
