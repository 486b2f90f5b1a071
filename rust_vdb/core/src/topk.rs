//! Bounded top-k selection: a max-heap of the k best (smallest) scores, ties to the smaller id.

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

#[cfg(test)]
mod tests {
    use super::*;

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
