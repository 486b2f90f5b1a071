//! The packed pairs a search sorts and carries, one u64 each with the list in the high half:
//! a probe (list, query of the block) and a candidate's place in the lists (list, row).

/// One query of a block probing one list, packed as `list << 32 | query`: probes sort (as
/// their words do) by list, then query.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Probe(u64);

impl Probe {
    #[inline]
    pub fn new(list: usize, query: usize) -> Self {
        debug_assert!(list <= u32::MAX as usize && query <= u32::MAX as usize);
        Probe(((list as u64) << 32) | query as u64)
    }

    #[inline]
    pub fn list(self) -> usize {
        (self.0 >> 32) as usize
    }

    #[inline]
    pub fn query(self) -> usize {
        self.0 as u32 as usize
    }
}

/// Where a candidate's vector lives, packed as `list << 32 | row`: candidates sort (as their
/// words do) in storage order, list by list.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct RowRef(u64);

impl RowRef {
    #[inline]
    pub fn new(list: usize, row: usize) -> Self {
        debug_assert!(list <= u32::MAX as usize && row <= u32::MAX as usize);
        RowRef(((list as u64) << 32) | row as u64)
    }

    #[inline]
    pub fn list(self) -> usize {
        (self.0 >> 32) as usize
    }

    #[inline]
    pub fn row(self) -> usize {
        self.0 as u32 as usize
    }
}

#[cfg(test)]
mod tests {
    use super::{Probe, RowRef};

    #[test]
    fn pairs_unpack_and_sort_by_list_first() {
        let p = Probe::new(70_000, 1023);
        assert_eq!((p.list(), p.query()), (70_000, 1023));
        let r = RowRef::new(u32::MAX as usize, 5);
        assert_eq!((r.list(), r.row()), (u32::MAX as usize, 5));
        let mut ps = [Probe::new(2, 0), Probe::new(1, 9), Probe::new(1, 3)];
        ps.sort_unstable();
        let got: Vec<_> = ps.iter().map(|p| (p.list(), p.query())).collect();
        assert_eq!(got, [(1, 3), (1, 9), (2, 0)]);
    }
}
