//! Bounded top-k selection, ties to the smaller id: a max-heap of the k best (smallest) scores
//! (`TopK`), and a reservoir that collects candidates under a threshold and cuts to k only
//! when full (`Reservoir`: no heap churn on the hot scan path).

/// One candidate: the score to minimise, the user id, and a payload (e.g. its location).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit<P: Copy> {
    pub score: f32,
    pub id: i64,
    pub payload: P,
}

/// `a` ranks after `b`: larger score, or equal score and larger id.
#[inline(always)]
fn worse<P: Copy>(a: &Hit<P>, b: &Hit<P>) -> bool {
    a.score > b.score || (a.score == b.score && a.id > b.id)
}

/// Keeps the `k` best hits seen so far. The heap is reused across queries (`reset`), so a
/// search allocates it once per thread, not once per query.
#[derive(Clone, Debug)]
pub struct TopK<P: Copy> {
    k: usize,
    heap: Vec<Hit<P>>, // heap[0] is the worst kept hit
}

impl<P: Copy> Default for TopK<P> {
    fn default() -> Self {
        TopK::new(0)
    }
}

impl<P: Copy> TopK<P> {
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            heap: Vec::with_capacity(k),
        }
    }

    /// Empties the heap and sets a new capacity, keeping the allocation.
    pub fn reset(&mut self, k: usize) {
        self.k = k;
        self.heap.clear();
        if self.heap.capacity() < k {
            self.heap.reserve(k);
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Scores strictly above this cannot enter (ties may still enter by id): +inf until full.
    #[inline(always)]
    pub fn threshold(&self) -> f32 {
        if self.heap.len() < self.k {
            f32::INFINITY
        } else {
            self.heap[0].score
        }
    }

    #[inline]
    pub fn push(&mut self, score: f32, id: i64, payload: P) {
        if self.k == 0 {
            return;
        }
        let hit = Hit { score, id, payload };
        if self.heap.len() < self.k {
            self.heap.push(hit);
            self.sift_up(self.heap.len() - 1);
        } else if worse(&self.heap[0], &hit) {
            self.heap[0] = hit;
            self.sift_down(0);
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if worse(&self.heap[i], &self.heap[parent]) {
                self.heap.swap(i, parent);
                i = parent;
            } else {
                break;
            }
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && worse(&self.heap[r], &self.heap[l]) {
                r
            } else {
                l
            };
            if worse(&self.heap[c], &self.heap[i]) {
                self.heap.swap(c, i);
                i = c;
            } else {
                break;
            }
        }
    }

    /// The kept hits, best first (ascending score, then ascending id). Empties the heap.
    pub fn drain_sorted(&mut self, out: &mut Vec<Hit<P>>) {
        out.clear();
        out.extend_from_slice(&self.heap);
        self.heap.clear();
        out.sort_unstable_by(|a, b| a.score.total_cmp(&b.score).then(a.id.cmp(&b.id)));
    }
}

#[inline(always)]
fn by_rank<P: Copy>(a: &Hit<P>, b: &Hit<P>) -> std::cmp::Ordering {
    a.score.total_cmp(&b.score).then(a.id.cmp(&b.id))
}

/// Keeps the `k` best hits seen so far like `TopK`, with amortised O(1) pushes: hits at or
/// under the threshold are appended, and the buffer is cut back to its k best (one linear
/// selection) when it holds `2k` (at least k + 16). Between two cuts the threshold stays put,
/// so the scan's compare-and-skip loop has a steady, predictable bound (a binary heap's
/// sift-downs dominate a prescore that keeps ~80 of a few thousand codes).
#[derive(Clone, Debug)]
pub struct Reservoir<P: Copy> {
    k: usize,
    cap: usize,
    thr: f32,
    buf: Vec<Hit<P>>,
}

impl<P: Copy> Default for Reservoir<P> {
    fn default() -> Self {
        Reservoir::new(0)
    }
}

impl<P: Copy> Reservoir<P> {
    pub fn new(k: usize) -> Self {
        let mut r = Reservoir {
            k: 0,
            cap: 0,
            thr: f32::INFINITY,
            buf: Vec::new(),
        };
        r.reset(k);
        r
    }

    /// Empties the buffer and sets a new k, keeping the allocation.
    pub fn reset(&mut self, k: usize) {
        self.k = k;
        self.cap = (2 * k).max(k + 16);
        self.thr = f32::INFINITY;
        self.buf.clear();
        if self.buf.capacity() < self.cap {
            self.buf.reserve(self.cap);
        }
    }

    /// How many hits it keeps.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Scores strictly above this cannot enter (equal scores may, by id): +inf until k hits
    /// were kept at a cut. Only ever decreases.
    #[inline(always)]
    pub fn threshold(&self) -> f32 {
        self.thr
    }

    /// Adds a hit; the caller has already skipped scores above `threshold()` (a larger score
    /// is harmless, just wasted work).
    #[inline(always)]
    pub fn push(&mut self, score: f32, id: i64, payload: P) {
        if self.k == 0 {
            return;
        }
        self.buf.push(Hit { score, id, payload });
        if self.buf.len() >= self.cap {
            self.cut();
        }
    }

    /// Cuts the buffer to its k best now and returns the threshold: the k-th best score seen
    /// so far, tighter than `threshold()` between cuts. For a scan about to test many rows
    /// against one bound (a list's heads); the k best kept are the same either way.
    pub fn tightened(&mut self) -> f32 {
        self.cut();
        self.thr
    }

    /// Keeps the k best of the buffer; the threshold becomes the worst of them.
    fn cut(&mut self) {
        if self.buf.len() <= self.k {
            return;
        }
        self.buf.select_nth_unstable_by(self.k - 1, by_rank);
        self.buf.truncate(self.k);
        self.thr = self.buf[self.k - 1].score;
    }

    /// The k best hits, best first (ascending score, then ascending id). Empties the buffer.
    pub fn drain_sorted(&mut self, out: &mut Vec<Hit<P>>) {
        self.cut();
        out.clear();
        out.extend_from_slice(&self.buf);
        self.buf.clear();
        self.thr = f32::INFINITY;
        out.sort_unstable_by(by_rank);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pseudo-random (score, id) items with many ties.
    fn items(n: usize, seed: u64) -> Vec<(f32, i64)> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (((x >> 33) % 97) as f32, i as i64)
            })
            .collect()
    }

    #[test]
    fn tightened_is_the_kth_best_so_far_and_keeps_the_same_hits() {
        let all = items(500, 9);
        let (mut a, mut b) = (Reservoir::<()>::new(10), Reservoir::<()>::new(10));
        for (i, &(score, id)) in all.iter().enumerate() {
            let thr = if i % 7 == 0 {
                a.tightened()
            } else {
                a.threshold()
            };
            if i % 7 == 0 && i >= 10 {
                let mut seen: Vec<f32> = all[..i].iter().map(|x| x.0).collect();
                seen.sort_by(f32::total_cmp);
                assert_eq!(thr, seen[9], "after {i} hits");
            }
            if score <= thr {
                a.push(score, id, ());
            }
            if score <= b.threshold() {
                b.push(score, id, ());
            }
        }
        let (mut ha, mut hb) = (Vec::new(), Vec::new());
        a.drain_sorted(&mut ha);
        b.drain_sorted(&mut hb);
        assert_eq!(ha, hb);
    }

    #[test]
    fn reservoir_equals_heap_with_ties_and_threshold_skips() {
        for &(n, k) in &[
            (0usize, 3usize),
            (5, 10),
            (100, 1),
            (1000, 10),
            (3000, 80),
            (500, 200),
        ] {
            for seed in 0..4 {
                let mut its = items(n, seed);
                if seed % 2 == 1 {
                    its.reverse();
                }
                let mut h = TopK::<u32>::new(k);
                let mut r = Reservoir::<u32>::new(k);
                for &(s, id) in &its {
                    h.push(s, id, id as u32);
                    if s <= r.threshold() {
                        r.push(s, id, id as u32);
                    }
                }
                let (mut a, mut b) = (Vec::new(), Vec::new());
                h.drain_sorted(&mut a);
                r.drain_sorted(&mut b);
                assert_eq!(a, b, "n={n} k={k} seed={seed}");
            }
        }
        // Reuse after reset with another k.
        let mut r = Reservoir::<()>::new(50);
        r.reset(2);
        for (s, id) in [(3.0, 1), (1.0, 9), (1.0, 4), (0.5, 7)] {
            r.push(s, id, ());
        }
        let mut out = Vec::new();
        r.drain_sorted(&mut out);
        assert_eq!(out.iter().map(|h| h.id).collect::<Vec<_>>(), vec![7, 4]);
    }

    fn best(k: usize, items: &[(f32, i64)]) -> Vec<(f32, i64)> {
        let mut t = TopK::<()>::new(k);
        for &(s, id) in items {
            t.push(s, id, ());
        }
        let mut out = Vec::new();
        t.drain_sorted(&mut out);
        out.iter().map(|h| (h.score, h.id)).collect()
    }

    #[test]
    fn keeps_k_smallest_sorted() {
        let items: Vec<(f32, i64)> = (0..100).map(|i| (((i * 37) % 100) as f32, i)).collect();
        let got = best(5, &items);
        let scores: Vec<f32> = got.iter().map(|x| x.0).collect();
        assert_eq!(scores, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn ties_go_to_the_smaller_id_whatever_the_order() {
        let mut items: Vec<(f32, i64)> = (0..20).map(|i| (1.0, 19 - i)).collect();
        items.push((0.5, 99));
        assert_eq!(
            best(4, &items),
            vec![(0.5, 99), (1.0, 0), (1.0, 1), (1.0, 2)]
        );
        items.reverse();
        assert_eq!(
            best(4, &items),
            vec![(0.5, 99), (1.0, 0), (1.0, 1), (1.0, 2)]
        );
    }

    #[test]
    fn fewer_than_k_and_reset() {
        let mut t = TopK::<u32>::new(10);
        t.push(3.0, 3, 0);
        t.push(1.0, 1, 0);
        assert_eq!(t.threshold(), f32::INFINITY);
        let mut out = Vec::new();
        t.drain_sorted(&mut out);
        assert_eq!(out.iter().map(|h| h.id).collect::<Vec<_>>(), vec![1, 3]);
        t.reset(1);
        t.push(2.0, 5, 0);
        t.push(2.0, 4, 0);
        assert_eq!(t.threshold(), 2.0);
        t.drain_sorted(&mut out);
        assert_eq!(out[0].id, 4);
    }
}
