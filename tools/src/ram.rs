//! `--ram`: how much memory a model may take, with its routed experts read from disk into a
//! budgeted cache (`models::weights::ExpertCache`) instead of paged in from the memory map.
//!
//! The planner gives the memory the rest needs first — the resident weights (everything
//! but the routed experts: attention, shared experts, embeddings, head, used from the map
//! by every token), the decode caches of the context and the graphs' working memory — and the
//! remainder to the experts. `auto` (the default) turns the cache on only where the model
//! file does not fit in the memory available, with that memory as the figure.

use anyhow::{bail, Result};
use models::model::Model;
use models::weights::ExpertCacheConfig;
use std::path::Path;

/// Memory set aside for the graphs' working memory (executor arenas of a 512-token prompt
/// chunk and a decode step of V4-Flash: 0.6 GiB measured, see `docs/design.md`).
pub const WORKSPACE: u64 = 1 << 30;

/// Share of the available memory `auto` plans with (the rest for the OS and other programs).
pub const AUTO_SHARE: f64 = 0.9;

/// Fewest bytes an expert budget may be: the experts of one token in one layer many times
/// over (below it nearly every expert is read for each use).
const MIN_EXPERT_SLOTS: u64 = 64;

/// `--ram`'s value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ram {
    /// The cache where the file does not fit in the memory available.
    Auto,
    /// Experts from the memory map.
    Off,
    /// This many bytes for the whole model.
    Bytes(u64),
}

/// Parses `auto`, `off` or a number of GiB (`12`, `7.5`).
pub fn parse_ram(s: &str) -> std::result::Result<Ram, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(Ram::Auto),
        "off" | "none" => Ok(Ram::Off),
        v => match v
            .trim_end_matches("gib")
            .trim_end_matches('g')
            .parse::<f64>()
        {
            Ok(g) if g.is_finite() && g > 0.0 && g < 1e6 => {
                Ok(Ram::Bytes((g * (1u64 << 30) as f64) as u64))
            }
            _ => Err(format!(
                "'{s}': expected a number of GiB (e.g. 12), auto or off"
            )),
        },
    }
}

/// Bytes of the model's files: every shard of a split GGUF or of a checkpoint, `None` where
/// unreadable (the load that follows reports why).
fn file_bytes(path: &Path) -> Option<u64> {
    if is_gguf(path) {
        let f = models::gguf::GgufFile::open(path).ok()?;
        return Some(f.shards().iter().map(|s| s.bytes().len() as u64).sum());
    }
    let m = models::safetensors::SafetensorsModel::open(path).ok()?;
    Some(m.shards().iter().map(|s| s.file_len()).sum())
}

fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == b"GGUF"
}

/// The expert cache to load `path` with (`None`: experts from the memory map), its budget
/// at first the whole figure ([`plan`] lowers it once the context is known).
pub fn expert_cache(
    ram: Ram,
    path: Option<&Path>,
    available: Option<u64>,
) -> Result<Option<ExpertCacheConfig>> {
    let bytes = match (ram, path) {
        (Ram::Off, _) | (Ram::Auto, None) => return Ok(None),
        (Ram::Bytes(_), None) => {
            bail!("--ram: the built-in model is held in memory; give a model file with -m")
        }
        (Ram::Bytes(b), Some(_)) => {
            if let Some(avail) = available.filter(|&a| b > a) {
                let g = |x: u64| x as f64 / (1u64 << 30) as f64;
                bail!(
                    "--ram {:.1} GiB is more than the {:.1} GiB of memory available now: the \
                     cache would be killed or push other programs out; give at most {:.1}",
                    g(b),
                    g(avail),
                    g(avail)
                );
            }
            b
        }
        (Ram::Auto, Some(p)) => {
            let (Some(size), Some(avail)) = (file_bytes(p), available) else {
                return Ok(None);
            };
            let usable = (avail as f64 * AUTO_SHARE) as u64;
            if size <= usable {
                return Ok(None);
            }
            usable
        }
    };
    Ok(Some(ExpertCacheConfig::with_budget(bytes)))
}

/// How `--ram` is shared out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The whole figure.
    pub ram: u64,
    /// Weights used from the map by every token (all but the routed experts).
    pub resident: u64,
    /// The decode caches of the context.
    pub caches: u64,
    /// The graphs' working memory.
    pub workspace: u64,
    /// What the expert cache gets.
    pub experts: u64,
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = |b: u64| b as f64 / (1u64 << 30) as f64;
        write!(
            f,
            "ram {:.1} GiB: resident weights {:.2}, caches {:.2}, workspace {:.2}, experts {:.2} GiB",
            g(self.ram),
            g(self.resident),
            g(self.caches),
            g(self.workspace),
            g(self.experts)
        )
    }
}

/// Shares `ram` bytes out for `model` (opened with an expert cache) at a context of `ctx`
/// tokens for `seqs` sequences; an error with the figures when the experts would get too
/// little.
pub fn plan(ram: u64, model: &dyn Model, ctx: usize, seqs: u64) -> Result<Plan> {
    let Some(cache) = model.expert_cache() else {
        bail!("the model was opened without an expert cache");
    };
    let total = model.weight_bytes().map_or(0, |w| w.total);
    let resident = total.saturating_sub(cache.paged_bytes());
    let caches = model.cache_parts(ctx).iter().map(|p| p.bytes).sum::<u64>() * seqs;
    let need = resident + caches + WORKSPACE;
    let min = MIN_EXPERT_SLOTS * cache.largest_expert();
    let g = |b: u64| b as f64 / (1u64 << 30) as f64;
    if ram < need + min {
        bail!(
            "--ram {:.1} GiB is too little: the resident weights take {:.2} GiB, the caches of \
             {ctx} tokens {:.2}, the working memory {:.2}, and the experts need at least {:.2} \
             (give at least {:.1} GiB, or lower --ctx)",
            g(ram),
            g(resident),
            g(caches),
            g(WORKSPACE),
            g(min),
            g(need + min) + 0.05
        );
    }
    Ok(Plan {
        ram,
        resident,
        caches,
        workspace: WORKSPACE,
        experts: ram - need,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_values_parse() {
        assert_eq!(parse_ram("auto"), Ok(Ram::Auto));
        assert_eq!(parse_ram("OFF"), Ok(Ram::Off));
        assert_eq!(parse_ram("12"), Ok(Ram::Bytes(12 << 30)));
        assert_eq!(parse_ram("1.5GiB"), Ok(Ram::Bytes(3 << 29)));
        for bad in ["", "-1", "0", "nan", "twelve", "inf"] {
            let e = parse_ram(bad).unwrap_err();
            assert!(e.contains("GiB"), "{e}");
        }
    }

    #[test]
    fn auto_turns_the_cache_on_only_for_a_file_larger_than_memory() {
        let p = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/dsv4-tiny-trained-Q8_0.gguf"
        ));
        let size = std::fs::metadata(p).unwrap().len();
        assert_eq!(
            expert_cache(Ram::Auto, Some(p), Some(size * 2)).unwrap(),
            None
        );
        let c = expert_cache(Ram::Auto, Some(p), Some(size / 2))
            .unwrap()
            .unwrap();
        assert_eq!(c.budget, (size as f64 / 2.0 * AUTO_SHARE) as u64);
        assert_eq!(expert_cache(Ram::Off, Some(p), Some(1)).unwrap(), None);
        assert_eq!(
            expert_cache(Ram::Bytes(5 << 30), Some(p), None)
                .unwrap()
                .unwrap()
                .budget,
            5 << 30
        );
        let e = expert_cache(Ram::Bytes(5 << 30), Some(p), Some(4 << 30)).unwrap_err();
        assert!(
            e.to_string().contains("5.0 GiB") && e.to_string().contains("4.0 GiB"),
            "{e}"
        );
        let e = expert_cache(Ram::Bytes(5 << 30), None, None).unwrap_err();
        assert!(e.to_string().contains("-m"), "{e}");
        // an official checkpoint: its shards together are the size
        let ckpt = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../models/tests/fixtures/dsv4-tiny-fp8"
        ));
        let shards: u64 = std::fs::read_dir(ckpt)
            .unwrap()
            .map(|f| f.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        assert_eq!(file_bytes(ckpt), Some(shards));
        assert!(expert_cache(Ram::Auto, Some(ckpt), Some(shards / 2))
            .unwrap()
            .is_some());
        assert_eq!(
            expert_cache(Ram::Auto, Some(ckpt), Some(shards * 2)).unwrap(),
            None
        );
    }
}
