//! The cache's reads: whole experts into page-aligned buffers (`O_DIRECT`, or buffered with
//! the pages dropped afterwards), the I/O threads that work the queues, and eviction to make
//! room.

use super::{
    in_page, ExpertConvert, ExpertPart, Layout, ReadFile, Shared, Slot, State, TensorSpec, ALIGN,
};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

/// One aligned page of an expert buffer.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(4096))]
struct Page([u8; ALIGN]);

/// An expert's bytes as read: whole pages, the expert at `at..at + len` of them.
pub(super) struct Buf(Vec<Page>);

impl AsRef<[u8]> for Buf {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

/// Evicts one resident expert no one holds (probation before protected, least recently
/// used first; failed entries first of all; for a prefetch (`!demand`), never one read
/// ahead and not yet used). Returns its buffer, or `None` when nothing can be evicted.
fn evict_one(shared: &Shared, st: &mut State, demand: bool) -> Option<Option<Buf>> {
    let key = st
        .entries
        .iter()
        .filter(|(_, v)| match &v.slot {
            Slot::Ready(b) => Arc::strong_count(b) == 1 && (demand || !v.fresh),
            Slot::Failed => true,
            _ => false,
        })
        .min_by_key(|(_, v)| (!matches!(v.slot, Slot::Failed), v.protected, v.tick))
        .map(|(&k, _)| k)?;
    let v = st.remove(key)?;
    if v.fresh {
        shared.counters.wasted.fetch_add(1, Ordering::Relaxed);
    }
    Some(match v.slot {
        Slot::Ready(b) => Arc::try_unwrap(b).ok(),
        _ => None,
    })
}

/// Reads queued entry `key` (the lock is released during the read and held again on
/// return). A prefetch (`!demand`: an I/O thread reading ahead) evicts only experts already
/// used and gives up, leaving the entry queued for the thread that will need it, when that
/// does not make room: reading ahead more than the budget holds would evict what was read
/// ahead before it is used.
pub(super) fn load<'a>(
    shared: &'a Shared,
    mut st: MutexGuard<'a, State>,
    key: (u32, u32),
    demand: bool,
) -> MutexGuard<'a, State> {
    let read = ReadPlan::of(&st.tensors[key.0 as usize], key.1);
    let pages = read.pages();
    let bytes = (pages * ALIGN) as u64;
    // room first: evict until the buffer fits (or nothing more can go)
    let mut reuse = None;
    while st.used + bytes > st.budget {
        match evict_one(shared, &mut st, demand) {
            Some(b) => {
                if let Some(b) = b.filter(|b| b.0.len() == pages) {
                    reuse = Some(b);
                }
            }
            None if demand => break,
            None => return st,
        }
    }
    if let Some(ent) = st.entries.get_mut(&key) {
        ent.slot = Slot::Loading;
        ent.bytes = bytes;
    }
    st.used += bytes;
    st.peak = st.peak.max(st.used);
    let t0 = Instant::now();
    if st.in_flight == 0 {
        st.busy_since = Some(t0);
    }
    st.in_flight += 1;
    drop(st);
    let res = read.run(reuse);
    shared
        .counters
        .read_ns
        .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let mut st = shared.lock();
    st.in_flight -= 1;
    if st.in_flight == 0 {
        if let Some(since) = st.busy_since.take() {
            shared
                .counters
                .busy_ns
                .fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
    let slot = match res {
        Ok((buf, n)) => {
            shared.counters.bytes_read.fetch_add(n, Ordering::Relaxed);
            Slot::Ready(Arc::new(buf))
        }
        Err((path, e)) => {
            st.error.get_or_insert_with(|| {
                format!(
                    "{}: reading expert {} of '{}': {e}",
                    path.display(),
                    key.1,
                    read.name
                )
            });
            Slot::Failed
        }
    };
    match st.entries.get_mut(&key) {
        Some(ent) => ent.slot = slot,
        // (entries are only removed when ready or failed, so this does not happen)
        None => st.used -= bytes,
    }
    shared.loaded.notify_all();
    st
}

/// What one expert's read needs, taken from its tensor's spec so that the read runs
/// without the cache's lock.
struct ReadPlan {
    name: String,
    /// Bytes nodes use.
    len: usize,
    how: How,
}

enum How {
    /// The pages around `len` bytes at `pos` of `file`, the expert at `at` of them.
    Strided {
        file: Arc<ReadFile>,
        pos: u64,
        at: usize,
    },
    /// Parts read in order, then converted into the buffer.
    Parts {
        e: usize,
        parts: Vec<(Arc<ReadFile>, ExpertPart)>,
        convert: ExpertConvert,
    },
}

impl ReadPlan {
    fn of(t: &TensorSpec, e: u32) -> ReadPlan {
        let how = match &t.layout {
            Layout::Strided {
                file,
                offset,
                stride,
            } => How::Strided {
                file: file.clone(),
                pos: offset + u64::from(e) * stride,
                at: in_page(t, e),
            },
            Layout::Parts { experts, convert } => How::Parts {
                e: e as usize,
                parts: experts.get(e as usize).cloned().unwrap_or_default(),
                convert: convert.clone(),
            },
        };
        ReadPlan {
            name: t.name.clone(),
            len: t.len as usize,
            how,
        }
    }

    /// Pages of the expert's buffer.
    fn pages(&self) -> usize {
        match &self.how {
            How::Strided { at, .. } => (at + self.len).div_ceil(ALIGN),
            How::Parts { .. } => self.len.div_ceil(ALIGN),
        }
    }

    /// Reads the expert into `reuse` (a buffer of [`ReadPlan::pages`] pages) or a new buffer;
    /// returns it and the bytes read, or the file that failed and why.
    fn run(&self, reuse: Option<Buf>) -> Result<(Buf, u64), (PathBuf, std::io::Error)> {
        match &self.how {
            How::Strided { file, pos, at } => {
                let buf = Buf::zeroed(reuse, self.pages()).map_err(|e| (file.path.clone(), e))?;
                read_expert(file, buf, pos - *at as u64, at + self.len)
                    .map_err(|e| (file.path.clone(), e))
            }
            How::Parts { e, parts, convert } => {
                let mut read = Vec::with_capacity(parts.len());
                let mut n = 0;
                for (file, part) in parts {
                    let at = (part.offset % ALIGN as u64) as usize;
                    let need = at + part.len as usize;
                    let fail = |e| (file.path.clone(), e);
                    let buf = Buf::zeroed(None, need.div_ceil(ALIGN)).map_err(fail)?;
                    let (buf, got) =
                        read_expert(file, buf, part.offset - at as u64, need).map_err(fail)?;
                    n += got;
                    read.push((buf, at, part.len as usize));
                }
                let views: Vec<&[u8]> = read
                    .iter()
                    .map(|(b, at, len)| &b.as_ref()[*at..at + len])
                    .collect();
                let mut out =
                    Buf::zeroed(reuse, self.pages()).map_err(|e| (self.first_path(), e))?;
                // a reused buffer holds another expert
                let dst = &mut bytemuck::cast_slice_mut(&mut out.0)[..self.len];
                dst.fill(0);
                convert(*e, &views, dst).map_err(|why| {
                    (
                        self.first_path(),
                        std::io::Error::new(std::io::ErrorKind::InvalidData, why),
                    )
                })?;
                Ok((out, n))
            }
        }
    }

    fn first_path(&self) -> PathBuf {
        match &self.how {
            How::Strided { file, .. } => file.path.clone(),
            How::Parts { parts, .. } => parts.first().map(|p| p.0.path.clone()).unwrap_or_default(),
        }
    }
}

impl Buf {
    /// `reuse`, or a new zeroed buffer of `pages` pages.
    fn zeroed(reuse: Option<Buf>, pages: usize) -> std::io::Result<Buf> {
        if let Some(b) = reuse {
            return Ok(b);
        }
        let mut v = Vec::new();
        v.try_reserve_exact(pages).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("no memory for a {} KiB expert buffer", pages * 4),
            )
        })?;
        v.resize(pages, Page([0; ALIGN]));
        Ok(Buf(v))
    }
}

/// Reads `need` bytes from `start` (page-aligned) of `file` into `buf`; returns it and the
/// bytes read.
fn read_expert(
    file: &ReadFile,
    mut buf: Buf,
    start: u64,
    need: usize,
) -> std::io::Result<(Buf, u64)> {
    let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut buf.0);
    if let (Some(f), true) = (&file.direct, file.direct_ok.load(Ordering::Relaxed)) {
        let mut done = 0usize;
        let mut ok = true;
        while done < need {
            match f.read_at(&mut dst[done..], start + done as u64) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file ends before the expert does",
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && done == 0 => {
                    // the file system refuses O_DIRECT reads: buffered from now on
                    file.direct_ok.store(false, Ordering::Relaxed);
                    ok = false;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if ok {
            return Ok((buf, done as u64));
        }
    }
    // buffered: only the expert's bytes, then their pages are dropped from the page cache
    // so the budget stays the memory the experts take
    file.buffered.read_exact_at(&mut dst[..need], start)?;
    // SAFETY: posix_fadvise only reads its arguments; the descriptor is open for the call.
    unsafe {
        libc::posix_fadvise(
            file.buffered.as_raw_fd(),
            start as libc::off_t,
            need as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
    Ok((buf, need as u64))
}

/// An I/O thread: reads queued experts until the cache is dropped.
pub(super) fn io_loop(shared: &Shared) {
    let mut st = shared.lock();
    loop {
        if st.shutdown {
            return;
        }
        let Some(key) = st.queue.pop_front().or_else(|| st.guesses.pop_front()) else {
            st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        if matches!(st.entries.get(&key).map(|e| &e.slot), Some(Slot::Queued)) {
            st = load(shared, st, key, false);
        }
    }
}
