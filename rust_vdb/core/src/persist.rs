//! Save/load of an IvfIndex: magic, format version, header, payload, crc32; load verifies
//! everything before building the index, and save writes a temporary file then renames it.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use half::f16;

use crate::error::{Result, VdbError};
use crate::ivf::{CodeSplit, Ids, InvList, IvfIndex, Storage};
use crate::metric::Metric;
use crate::pq4::Pq4;
use crate::quant::Sq8;

/// The first 8 bytes of every index file.
pub const MAGIC: &[u8; 8] = b"VDBIVF\x00\x01";
/// Bumped whenever the layout changes; newer versions are refused. Version 2 added the 4-bit
/// prefilter's quantizer after the u8 quantizer; a version 1 file loads with one trained on its
/// stored codes.
pub const FORMAT_VERSION: u32 = 2;

#[cfg(target_endian = "big")]
compile_error!("the index file format is little-endian; big-endian targets are not supported");

fn io(context: String) -> impl FnOnce(std::io::Error) -> VdbError {
    move |source| VdbError::Io { context, source }
}

/// A writer that keeps the crc32 of everything written.
struct CrcWriter<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> CrcWriter<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.inner.write_all(bytes)
    }
    fn u8(&mut self, v: u8) -> std::io::Result<()> {
        self.put(&[v])
    }
    fn u32(&mut self, v: u32) -> std::io::Result<()> {
        self.put(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> std::io::Result<()> {
        self.put(&v.to_le_bytes())
    }
}

fn write_index<W: Write>(w: &mut CrcWriter<W>, idx: &IvfIndex) -> std::io::Result<()> {
    w.put(MAGIC)?;
    w.u32(FORMAT_VERSION)?;
    w.u32(idx.dim as u32)?;
    w.u8(idx.metric.code())?;
    w.u8(idx.storage.code())?;
    w.u8(idx.is_trained() as u8)?;
    w.u8(idx.sq.is_some() as u8)?;
    w.u64(idx.nlist_request.map_or(0, |n| n as u64))?;
    w.u64(idx.seed)?;
    w.u64(idx.lists.len() as u64)?;
    w.u64(idx.ntotal as u64)?;
    w.put(bytemuck::cast_slice(&idx.centroids))?;
    if let Some(sq) = &idx.sq {
        w.put(bytemuck::cast_slice(&sq.vmin))?;
        w.put(bytemuck::cast_slice(&sq.step))?;
    }
    w.u8(idx.pq.is_some() as u8)?;
    if let Some(pq) = &idx.pq {
        w.put(bytemuck::cast_slice(&pq.centroids))?;
    }
    for l in &idx.lists {
        w.u64(l.ids.len() as u64)?;
        match &l.ids {
            Ids::Wide(v) => w.put(bytemuck::cast_slice(v))?,
            Ids::Narrow(_) => {
                let wide: Vec<i64> = l.ids.iter().collect();
                w.put(bytemuck::cast_slice(&wide))?
            }
        }
        match &idx.split {
            // whole codes in dim order: the split is derived again at load
            Some(split) => {
                let mut whole = vec![0u8; l.len() * idx.dim];
                for (r, code) in whole.chunks_exact_mut(idx.dim).enumerate() {
                    l.code_of(r, idx.dim, Some(split), code);
                }
                w.put(&whole)?;
            }
            None => w.put(&l.codes)?,
        }
        w.put(bytemuck::cast_slice(&l.vf16))?;
        w.put(bytemuck::cast_slice(&l.vf32))?;
    }
    Ok(())
}

/// Writes `idx` to `path`: to a temporary file in the same directory first, renamed over
/// `path` only once complete and flushed, so a failed save never damages an existing file.
pub fn save(idx: &IvfIndex, path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| {
        VdbError::InvalidInput(format!(
            "cannot save to {}: not a file path",
            path.display()
        ))
    })?;
    // The temporary file is this save's own (process id and a per-process count, created
    // exclusively): two saves to one path at once, from two threads, must not write into the
    // same file, or one renames the other's half-written bytes into place.
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let (tmp, f) = loop {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        let n = SAVES.fetch_add(1, Ordering::Relaxed);
        tmp_name.push(format!(".tmp{}-{n}", std::process::id()));
        let tmp: PathBuf = dir.join(tmp_name);
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => break (tmp, f),
            // left by a killed process that had this id: take the next name
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(VdbError::Io {
                    context: format!("cannot create {}", tmp.display()),
                    source: e,
                })
            }
        }
    };
    let result = (|| -> Result<()> {
        let mut w = CrcWriter {
            inner: BufWriter::with_capacity(1 << 20, f),
            crc: crc32fast::Hasher::new(),
        };
        write_index(&mut w, idx).map_err(io(format!("cannot write {}", tmp.display())))?;
        let crc = w.crc.clone().finalize();
        w.inner
            .write_all(&crc.to_le_bytes())
            .map_err(io(format!("cannot write {}", tmp.display())))?;
        let f = w.inner.into_inner().map_err(|e| VdbError::Io {
            context: format!("cannot write {}", tmp.display()),
            source: e.into_error(),
        })?;
        f.sync_all()
            .map_err(io(format!("cannot flush {}", tmp.display())))?;
        std::fs::rename(&tmp, path).map_err(io(format!(
            "cannot rename {} to {}",
            tmp.display(),
            path.display()
        )))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A bounds-checked reader over the verified file bytes.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or_else(|| {
            VdbError::CorruptFile(format!(
                "{}: truncated while reading {what} (needs {n} bytes at offset {}, file payload has {})",
                self.path.display(),
                self.pos,
                self.buf.len()
            ))
        })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    fn count(&mut self, what: &str) -> Result<usize> {
        let v = self.u64(what)?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v <= self.buf.len())
            .ok_or_else(|| {
                VdbError::CorruptFile(format!("{}: implausible {what} {v}", self.path.display()))
            })
    }
    fn vec<T: bytemuck::Pod>(&mut self, n: usize, what: &str) -> Result<Vec<T>> {
        let bytes = n.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            VdbError::CorruptFile(format!(
                "{}: implausible size of {what}",
                self.path.display()
            ))
        })?;
        let src = self.take(bytes, what)?;
        let mut v = vec![T::zeroed(); n];
        bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(src);
        Ok(v)
    }
}

fn corrupt(path: &Path, msg: impl std::fmt::Display) -> VdbError {
    VdbError::CorruptFile(format!("{}: {msg}", path.display()))
}

/// Reads an index written by `save`. The whole file is verified (magic, version, checksum,
/// sizes) before an index is returned; nothing is half-loaded.
pub fn load(path: &Path) -> Result<IvfIndex> {
    let mut f = File::open(path).map_err(io(format!("cannot open {}", path.display())))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(io(format!("cannot read {}", path.display())))?;
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(corrupt(
            path,
            "not a vdbbench IvfIndex file (wrong magic bytes)",
        ));
    }
    if bytes.len() < MAGIC.len() + 4 + 4 {
        return Err(corrupt(path, "truncated header"));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != FORMAT_VERSION && version != 1 {
        return Err(corrupt(
            path,
            format!("format version {version}; this build reads versions 1 to {FORMAT_VERSION}"),
        ));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes(tail.try_into().unwrap());
    let actual = crc32fast::hash(body);
    if stored != actual {
        return Err(corrupt(
            path,
            format!("checksum mismatch (stored {stored:08x}, computed {actual:08x}): the file is truncated or damaged"),
        ));
    }
    let mut r = Reader {
        buf: body,
        pos: 12,
        path,
    };
    let dim = r.u32("dim")? as usize;
    let metric =
        Metric::from_code(r.u8("metric")?).ok_or_else(|| corrupt(path, "unknown metric code"))?;
    let storage = Storage::from_code(r.u8("storage")?)
        .ok_or_else(|| corrupt(path, "unknown storage code"))?;
    let trained = r.u8("trained flag")? != 0;
    let has_sq = r.u8("quantizer flag")? != 0;
    let nlist_request = match r.u64("nlist")? {
        0 => None,
        n => Some(usize::try_from(n).map_err(|_| corrupt(path, "implausible nlist"))?),
    };
    let seed = r.u64("seed")?;
    let nlist = r.count("number of lists")?;
    let ntotal = r.count("ntotal")?;
    if dim == 0 || trained != (nlist > 0) || has_sq != (trained && storage == Storage::U8F16) {
        return Err(corrupt(path, "inconsistent header"));
    }
    let centroids = r.vec::<f32>(nlist * dim, "centroids")?;
    let sq = if has_sq {
        let vmin = r.vec::<f32>(dim, "quantizer offsets")?;
        let step = r.vec::<f32>(dim, "quantizer steps")?;
        Some(Sq8 { dim, vmin, step })
    } else {
        None
    };
    let pq_stored = version >= 2 && r.u8("prefilter flag")? != 0;
    let pq_fits = sq.is_some() && metric == Metric::L2 && Pq4::supports(dim);
    if pq_stored && !pq_fits {
        return Err(corrupt(path, "a prefilter quantizer for an index that cannot have one"));
    }
    let pq = if pq_stored {
        let centroids = r.vec::<f32>(dim / 2 * 16 * 2, "prefilter quantizer")?;
        if centroids.iter().any(|v| !v.is_finite()) {
            return Err(corrupt(path, "a prefilter centroid is not finite"));
        }
        Some(Pq4 { dim, centroids })
    } else {
        None
    };
    let mut lists = Vec::with_capacity(nlist);
    let mut total = 0usize;
    for li in 0..nlist {
        let n = r.count("list length")?;
        total += n;
        let what = format!("list {li}");
        let ids = r.vec::<i64>(n, &what)?;
        let (cn, hn, fn_) = match storage {
            Storage::F32 => (0, 0, n * dim),
            Storage::F16 => (0, n * dim, 0),
            Storage::U8F16 => (n * dim, n * dim, 0),
        };
        let codes = r.vec::<u8>(cn, &what)?;
        let vf16 = r.vec::<f16>(hn, &what)?;
        let vf32 = r.vec::<f32>(fn_, &what)?;
        lists.push(InvList {
            ids: Ids::from_vec(ids),
            codes,
            vf16,
            vf32,
            ..InvList::default()
        });
    }
    if total != ntotal {
        return Err(corrupt(
            path,
            format!("lists hold {total} vectors but the header says {ntotal}"),
        ));
    }
    if r.pos != body.len() {
        return Err(corrupt(
            path,
            format!(
                "{} unexpected bytes after the last list",
                body.len() - r.pos
            ),
        ));
    }
    let mut index = IvfIndex {
        dim,
        metric,
        storage,
        seed,
        nlist_request,
        centroids: Vec::new(),
        cnorms: Vec::new(),
        centroids_f16: Vec::new(),
        routing: None,
        sq,
        pq,
        split: None,
        lists,
        ntotal,
        codes_exact: false,
    };
    if storage == Storage::U8F16 && metric == Metric::L2 {
        index.split = CodeSplit::from_codes(
            index.lists.iter().flat_map(|l| l.codes.chunks_exact(dim)),
            dim,
        );
        for l in index.lists.iter_mut() {
            if let Some(split) = &index.split {
                l.split_codes(dim, split);
            }
            let (h, t) = index
                .split
                .as_ref()
                .map_or((dim, 0), |s| (s.head, s.tail()));
            l.fill_terms(h, t);
        }
    }
    if version == 1 && pq_fits && ntotal > 0 {
        // before the prefilter existed: one trained on the stored codes (the same each load)
        let mut whole = Vec::new();
        let mut code = vec![0u8; dim];
        for l in &index.lists {
            for r in 0..l.len() {
                l.code_of(r, dim, index.split.as_ref(), &mut code);
                whole.extend_from_slice(&code);
            }
        }
        index.pq = Some(Pq4::train(&whole, dim, seed));
    }
    let from = vec![0usize; index.lists.len()];
    index.encode_fs(&from, None)?;
    index.set_centroids(centroids);
    index.codes_exact = index.compute_codes_exact();
    index.advise_huge_pages();
    Ok(index)
}
