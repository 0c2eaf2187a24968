//! `fathom bench --diskbw -m MODEL`: the sequential read bandwidth of the file system that
//! holds the model, as weights streamed from disk are read — large reads that bypass the page
//! cache (`O_DIRECT`) where the file system supports it. Where it does not (tmpfs, some
//! overlay file systems), the reads are buffered after the file's cached pages are dropped
//! (`posix_fadvise(DONTNEED)`), and the report says so.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bytes per read.
const READ: usize = 8 << 20;
/// Most bytes read per pass.
const MAX_PASS: u64 = 2 << 30;
/// Fewest bytes measured.
const MIN_BYTES: u64 = 1 << 20;
/// `O_DIRECT` buffers and offsets are aligned to this.
const ALIGN: usize = 4096;

/// One 4 KiB-aligned page of a read buffer.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Page([u8; ALIGN]);

/// What [`measure`] found.
#[derive(Debug, Clone)]
pub struct DiskBw {
    /// The file read.
    pub file: PathBuf,
    /// GB/s of the best pass.
    pub best_gbs: f64,
    /// GB/s of every pass.
    pub passes: Vec<f64>,
    /// Bytes per pass.
    pub bytes: u64,
    /// Whether the reads bypassed the page cache (`O_DIRECT`).
    pub direct: bool,
}

/// The file to read for `model`: the file itself, or a checkpoint directory's largest
/// `.safetensors` shard.
fn file_of(model: &Path) -> Result<PathBuf> {
    if !model.is_dir() {
        return Ok(model.to_path_buf());
    }
    let mut best: Option<(u64, PathBuf)> = None;
    for e in std::fs::read_dir(model).with_context(|| model.display().to_string())? {
        let e = e?;
        let p = e.path();
        if p.extension().is_some_and(|x| x == "safetensors") {
            let len = e.metadata()?.len();
            if best.as_ref().is_none_or(|(l, _)| len > *l) {
                best = Some((len, p));
            }
        }
    }
    best.map(|(_, p)| p)
        .with_context(|| format!("{}: no .safetensors file to read", model.display()))
}

/// Read up to 2 GiB of `model`'s file sequentially, `passes` times (each pass from a different
/// offset where the file is long enough), in 8 MiB reads.
pub fn measure(model: &Path, passes: usize) -> Result<DiskBw> {
    let file = file_of(model)?;
    let len = std::fs::metadata(&file)
        .with_context(|| file.display().to_string())?
        .len();
    let bytes = (len.min(MAX_PASS) / ALIGN as u64) * ALIGN as u64;
    if bytes < MIN_BYTES {
        bail!(
            "{}: {len} bytes is too small to measure a read bandwidth (at least 1 MiB)",
            file.display()
        );
    }
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&file);
    let (mut f, direct) = match direct {
        Ok(f) => (f, true),
        Err(_) => (
            File::open(&file).with_context(|| file.display().to_string())?,
            false,
        ),
    };
    let mut buf = vec![Page([0; ALIGN]); READ / ALIGN];
    let mut out = Vec::new();
    for pass in 0..passes.max(1) {
        // successive passes start further into a long file (nothing of it cached either way)
        let span = len - bytes;
        let start = if span == 0 {
            0
        } else {
            (span / passes.max(1) as u64 * pass as u64) / ALIGN as u64 * ALIGN as u64
        };
        if !direct {
            // SAFETY: a valid descriptor and a byte range of it; the call only drops clean
            // cached pages.
            unsafe {
                libc::posix_fadvise(
                    f.as_raw_fd(),
                    start as i64,
                    bytes as i64,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
        }
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(start))?;
        let t0 = Instant::now();
        let mut done = 0u64;
        let bytes_mut: &mut [u8] = bytemuck_pages(&mut buf);
        while done < bytes {
            let n = READ.min((bytes - done) as usize);
            f.read_exact(&mut bytes_mut[..n])
                .with_context(|| format!("{}: reading at byte {}", file.display(), start + done))?;
            done += n as u64;
        }
        out.push(bytes as f64 / t0.elapsed().as_secs_f64() / 1e9);
    }
    Ok(DiskBw {
        file,
        best_gbs: out.iter().copied().fold(0.0, f64::max),
        passes: out,
        bytes,
        direct,
    })
}

/// The pages as one byte slice.
fn bytemuck_pages(p: &mut [Page]) -> &mut [u8] {
    let len = std::mem::size_of_val(p);
    // SAFETY: `Page` is `repr(C)` plain bytes with no padding (4096 bytes, align 4096), so
    // the slice's memory is `len` initialised bytes, borrowed mutably for the result's life.
    unsafe { std::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<u8>(), len) }
}
