//! Writing a synthetic model: the header encoded by [`GgufWriter`] (without holding any
//! tensor data), then every tensor streamed from a generator thread through a bounded
//! channel, so resident memory stays small whatever the file size.

use super::gen::TensorGen;
use super::{Planned, SynthError};
use crate::gguf::{GgufWriter, Value};
use std::borrow::Cow;

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;

/// A sink that only counts bytes.
struct Count(u64);

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A sink keeping the first `limit` bytes (never reading past them).
struct Prefix {
    buf: Vec<u8>,
    limit: usize,
}

impl Write for Prefix {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.limit - self.buf.len();
        self.buf.extend_from_slice(&buf[..buf.len().min(room)]);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The encoded header (everything before the first tensor's data, padding included), the
/// alignment and the total file size, as [`GgufWriter`] would write them.
pub(super) fn encode_header(
    kv: Vec<(String, Value)>,
    specs: &[Planned],
) -> Result<(Vec<u8>, u64, u64), SynthError> {
    let max = specs.iter().map(Planned::n_bytes).max().unwrap_or(0);
    // zeroed and never read: the pages are never committed
    let zeros = vec![
        0u8;
        usize::try_from(max)
            .map_err(|_| SynthError::Invalid("tensor too large".into()))?
    ];
    let mut w = GgufWriter::new();
    for (k, v) in kv {
        w.add_kv(k, v)?;
    }
    for s in specs {
        let data = &zeros[..s.n_bytes() as usize];
        w.add_tensor(s.name.clone(), s.dtype, &s.ne, Cow::Borrowed(data))?;
    }
    let align = w.alignment();
    let total = w.write_to(Count(0))?;
    let data: u64 = specs
        .iter()
        .map(|s| s.n_bytes().div_ceil(align) * align)
        .sum();
    let head_len = total - data;
    let mut head = Prefix {
        buf: Vec::with_capacity(head_len as usize),
        limit: head_len as usize,
    };
    w.write_to(&mut head)?;
    Ok((head.buf, align, total))
}

/// Streams the header and the generated tensors to `f` (the file `path`, written whole or
/// not at all by the caller); `progress(k, tensor, written, total)` after each tensor.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_file(
    f: &mut dyn Write,
    path: &Path,
    head: &[u8],
    align: u64,
    total: u64,
    specs: &[Planned],
    (seed, experts): (u64, usize),
    progress: &mut dyn FnMut(usize, &Planned, u64, u64),
) -> Result<(), SynthError> {
    let io = |source| SynthError::Io {
        path: path.to_path_buf(),
        source,
    };
    f.write_all(head).map_err(io)?;
    let mut written = head.len() as u64;
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(2);
    let (back_tx, back_rx) = mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| -> Result<(), SynthError> {
        scope.spawn(move || {
            let mut floats = Vec::new();
            for s in specs {
                let g = TensorGen::new(s, seed, experts);
                for c in 0..g.n_chunks() {
                    let mut buf = back_rx.try_recv().unwrap_or_default();
                    g.chunk(c, &mut buf, &mut floats);
                    if tx.send(buf).is_err() {
                        return; // the writer stopped
                    }
                }
            }
        });
        // rx and back_tx are moved in here, so an early return stops the generator
        let (rx, back_tx) = (rx, back_tx);
        for (k, s) in specs.iter().enumerate() {
            let n = s.n_bytes();
            let mut left = n;
            while left > 0 {
                let buf = rx
                    .recv()
                    .map_err(|_| SynthError::Invalid("the generator thread stopped".into()))?;
                f.write_all(&buf).map_err(io)?;
                left -= buf.len() as u64;
                let _ = back_tx.send(buf);
            }
            let pad = n.div_ceil(align) * align - n;
            f.write_all(&vec![0u8; pad as usize]).map_err(io)?;
            written += n + pad;
            progress(k, s, written, total);
        }
        Ok(())
    })?;
    if written != total {
        return Err(SynthError::Invalid(format!(
            "wrote {written} bytes, expected {total}"
        )));
    }
    Ok(())
}
