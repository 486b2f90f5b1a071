//! Experiment (not kept): a 4-bit first pass over every centroid for routing.
#[cfg(test)]
mod tests {
    use crate::kernels::kernels;
    use crate::centroid_codes::encode_half_step;
    use crate::pq4::{pack_row, packed_len, FS_BLOCK};
    use crate::route::{keep_best, keep_smallest};
    use std::time::Instant;

    #[test]
    #[ignore]
    fn fs_route_experiment() {
        let idx = crate::persist::load(std::path::Path::new("/tmp/psa2.vdb")).unwrap();
        let kern = kernels();
        let dim = idx.dim();
        let c = idx.centroids();
        let nlist = c.len() / dim;
        let sq = idx.quantizer().unwrap();
        let pq = idx.pq.as_ref().unwrap();
        let bb = pq.block_bytes();
        // centroid u8 codes (full), their half-step terms, and pq4 packed codes
        let mut codes = vec![0u8; nlist * dim];
        let mut packed = Vec::new();
        let mut pc = vec![0u8; pq.pairs()];
        for (li, out) in codes.chunks_exact_mut(dim).enumerate() {
            sq.encode(&c[li * dim..(li + 1) * dim], out);
            pq.encode(out, &mut pc);
            pack_row(&mut packed, bb, li, &pc);
        }
        packed.resize(packed_len(nlist, bb), 0);
        let terms: Vec<i32> = codes.chunks_exact(dim).map(crate::centroid_codes::half_step_term).collect();
        let cnorm: Vec<f32> = c.chunks_exact(dim).map(|r| r.iter().map(|v| v * v).sum()).collect();
        let bytes = std::fs::read("/tmp/exp/q2k.f32").unwrap();
        let qs: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        let nq = qs.len() / dim;
        let nprobe = 54usize;
        let keep = nprobe + 16;
        // reference: flat f32 routing
        let refl: Vec<Vec<u32>> = qs.chunks_exact(dim).map(|q| {
            let mut o: Vec<(f32, u32)> = (0..nlist).map(|li| {
                let r = &c[li * dim..(li + 1) * dim];
                (cnorm[li] - 2.0 * r.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), li as u32)
            }).collect();
            keep_best(&mut o, nprobe);
            let mut l: Vec<u32> = o.iter().map(|x| x.1).collect(); l.sort_unstable(); l
        }).collect();
        let cf16: Vec<half::f16> = c.iter().map(|&v| half::f16::from_f32(v)).collect();
        for rr in [0usize, 100, 150, 200, 300, 500] {
            let (mut lut, mut dists, mut qf) = (vec![0u8; pq.pairs() * 32], Vec::new(), vec![0f32; dim]);
            let (mut pos, mut dist) = (vec![0u32; nlist + FS_BLOCK], vec![0u32; nlist + FS_BLOCK]);
            let mut code = vec![0u8; dim];
            let (mut keys, mut tmp) = (Vec::<u64>::new(), Vec::<u64>::new());
            let mut sub = Vec::<u8>::new(); let mut subt = Vec::<i32>::new(); let mut ud = Vec::<u32>::new();
            let mut missed = 0usize; let mut tt = [0f64; 5];
            let t = Instant::now();
            for (qi, q) in qs.chunks_exact(dim).enumerate() {
                let t0 = Instant::now();
                encode_half_step(sq, q, &mut code);
                let cand: Vec<u32> = if rr == 0 {
                    (0..nlist as u32).collect()
                } else {
                    // query in the code domain
                    for (d, o) in q.iter().enumerate() { qf[d] = (*o - sq.vmin[d]) / sq.step[d]; }
                    (kern.pq4_lut)(&pq.centroids, &qf, &mut dists, &mut lut);
                    let t1 = Instant::now(); tt[0] += (t1 - t0).as_secs_f64();
                    // bound from every 8th block's sums
                    let nb = nlist.div_ceil(FS_BLOCK);
                    let mut smp: Vec<u32> = Vec::with_capacity(nb / 8 * 32 + 32);
                    for b in (0..nb).step_by(8) {
                        let rows = (nlist - b * FS_BLOCK).min(FS_BLOCK);
                        let got = (kern.fs_below)(&packed[b * bb..(b + 1) * bb], rows, &lut, u32::MAX, &mut pos, &mut dist);
                        smp.extend_from_slice(&dist[..got]);
                    }
                    let rank = (rr * smp.len() / nlist).max(1).min(smp.len());
                    let bound = *smp.select_nth_unstable(rank - 1).1;
                    let got = (kern.fs_below)(&packed, nlist, &lut, bound, &mut pos, &mut dist);
                    tt[1] += t1.elapsed().as_secs_f64();
                    keys.clear();
                    keys.extend((0..got).map(|i| (dist[i] as u64) << 32 | pos[i] as u64));
                    tt[4] += got as f64;
                    keys.iter().map(|&k| k as u32).collect()
                };
                let t2 = Instant::now();
                sub.clear(); subt.clear();
                for &li in &cand { sub.extend_from_slice(&codes[li as usize * dim..(li as usize + 1) * dim]); subt.push(terms[li as usize]); }
                ud.resize(cand.len(), 0);
                (kern.l2_u8_batch_pre)(&code, &sub, &subt, &mut ud);
                keys.clear();
                keys.extend(ud.iter().zip(&cand).map(|(&d, &li)| (d as u64) << 32 | li as u64));
                keep_smallest(&mut keys, keep, &mut tmp);
                let t3 = Instant::now(); tt[2] += (t3 - t2).as_secs_f64();
                let mut o: Vec<(f32, u32)> = keys.iter().map(|&k| {
                    let li = k as u32 as usize;
                    (cnorm[li] - 2.0 * (kern.dot_f32_f16)(q, &cf16[li * dim..(li + 1) * dim]), li as u32)
                }).collect();
                keep_best(&mut o, nprobe);
                tt[3] += t3.elapsed().as_secs_f64();
                let mut l: Vec<u32> = o.iter().map(|x| x.1).collect(); l.sort_unstable();
                missed += refl[qi].iter().filter(|x| l.binary_search(x).is_err()).count();
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / nq as f64;
            println!("R {rr}: lists missed vs flat f32 {:.4} per query ({} of {}), {us:.2} us/query  lut {:.2} fs {:.2} u8 {:.2} f16 {:.2} passers {:.0}", missed as f64 / nq as f64, missed, nq * nprobe, tt[0]*1e6/nq as f64, tt[1]*1e6/nq as f64, tt[2]*1e6/nq as f64, tt[3]*1e6/nq as f64, tt[4]/nq as f64);
        }
    }
}
