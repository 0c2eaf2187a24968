//! The live MoE configuration file (issue 6): TOML, or the seed's 32-byte binary form, checked
//! between tokens and applied to the graph's [`MoeKnobs`] with no rebuild.
//!
//! TOML fields (all optional; an empty file is the model's own routing):
//! - `top_k` (1…K): experts kept per token in the learned-router layers of `layers`;
//! - `layers` (`[start, end)` of layer indices): where `top_k` applies (default: all);
//! - `outer_top_k` (1…K): top-k for learned-router layers outside `layers` (default: K);
//! - `rescale` (`"none" | "l1" | "l2"`, default `"l2"`): rescaling of the kept weights;
//! - `min_weight` (≥ 0): adaptive tail — drop kept experts below this weight (of the model's
//!   `routed_scale` total), never going below `min_k` (default 1);
//! - `swiglu_keep_experts`, `swiglu_keep_shared` (0…128, 0 or 128 = no skipping): gate-first
//!   SwiGLU row skipping per 128-row stratum in the learned-router layers (see
//!   `graph::op::swiglu_select`).
//!
//! Binary form (a file ending in `.bin`): eight little-endian i32
//! `[top_k, outer_top_k, min_weight×1000, layer_start, layer_end_exclusive, rescale (0 none,
//! 1 l2, 2 l1), swiglu_keep_experts, swiglu_keep_shared]`.
//!
//! Hash-routed layers always keep all their experts. A file that does not parse, has
//! out-of-range values, or is torn (a `.bin` shorter or longer than 32 bytes) is rejected as a
//! whole; the [`MoeWatcher`] keeps the last good configuration and reports once.

use crate::model::MoeShape;
use graph::knobs::{LayerMoe, MoeKnobs, Rescale};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Errors of a configuration file.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum MoeConfigError {
    /// The file could not be read.
    #[error("{path}: {msg}")]
    Io {
        /// File.
        path: String,
        /// OS error.
        msg: String,
    },
    /// Not valid TOML / not 32 bytes.
    #[error("{path}: {msg}")]
    Parse {
        /// File.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// A value out of range for this model.
    #[error("{path}: '{field}' = {value}: {msg}")]
    Range {
        /// File.
        path: String,
        /// Field name.
        field: &'static str,
        /// The value.
        value: String,
        /// The allowed range.
        msg: String,
    },
}

/// A parsed configuration (before it is resolved per layer).
#[derive(Debug, Clone, PartialEq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeConfig {
    /// Experts kept in the layers of `layers`.
    pub top_k: Option<u32>,
    /// `[start, end)` of layers where `top_k` applies.
    pub layers: Option<[u32; 2]>,
    /// Experts kept in learned-router layers outside `layers`.
    pub outer_top_k: Option<u32>,
    /// `none`, `l1` or `l2`.
    pub rescale: Option<String>,
    /// Adaptive-tail threshold.
    pub min_weight: Option<f32>,
    /// Adaptive-tail floor.
    pub min_k: Option<u32>,
    /// SwiGLU rows kept per 128 (routed experts).
    pub swiglu_keep_experts: Option<u32>,
    /// SwiGLU rows kept per 128 (shared expert).
    pub swiglu_keep_shared: Option<u32>,
}

impl std::fmt::Display for MoeConfig {
    /// The fields the configuration sets, `key=value` separated by spaces (`layers=[a, b)`),
    /// or `model routing (empty file)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = Vec::new();
        if let Some(v) = self.top_k {
            s.push(format!("top_k={v}"));
        }
        if let Some([a, b]) = self.layers {
            s.push(format!("layers=[{a}, {b})"));
        }
        if let Some(v) = self.outer_top_k {
            s.push(format!("outer_top_k={v}"));
        }
        if let Some(v) = &self.rescale {
            s.push(format!("rescale={v}"));
        }
        if let Some(v) = self.min_weight.filter(|&w| w > 0.0) {
            s.push(format!("min_weight={v}"));
        }
        if let Some(v) = self.min_k {
            s.push(format!("min_k={v}"));
        }
        if let Some(v) = self.swiglu_keep_experts {
            s.push(format!("swiglu_keep_experts={v}"));
        }
        if let Some(v) = self.swiglu_keep_shared {
            s.push(format!("swiglu_keep_shared={v}"));
        }
        if s.is_empty() {
            f.write_str("model routing (empty file)")
        } else {
            f.write_str(&s.join(" "))
        }
    }
}

impl MoeConfig {
    /// Parse TOML text.
    pub fn from_toml(text: &str, path: &str) -> Result<MoeConfig, MoeConfigError> {
        toml::from_str(text).map_err(|e| MoeConfigError::Parse {
            path: path.into(),
            msg: e.to_string(),
        })
    }

    /// Parse the seed's 32-byte binary form.
    pub fn from_bin(bytes: &[u8], path: &str) -> Result<MoeConfig, MoeConfigError> {
        if bytes.len() != 32 {
            return Err(MoeConfigError::Parse {
                path: path.into(),
                msg: format!(
                    "{} bytes, the binary form has exactly 32 (torn or wrong file)",
                    bytes.len()
                ),
            });
        }
        let v: Vec<i32> = bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let nonneg = |i: usize, field: &'static str| -> Result<u32, MoeConfigError> {
            u32::try_from(v[i]).map_err(|_| MoeConfigError::Range {
                path: path.into(),
                field,
                value: v[i].to_string(),
                msg: "must be ≥ 0".into(),
            })
        };
        let rescale = match v[5] {
            0 => "none",
            1 => "l2",
            2 => "l1",
            x => {
                return Err(MoeConfigError::Range {
                    path: path.into(),
                    field: "rescale",
                    value: x.to_string(),
                    msg: "0 none, 1 l2, 2 l1".into(),
                })
            }
        };
        let opt = |x: u32| (x > 0).then_some(x);
        Ok(MoeConfig {
            top_k: opt(nonneg(0, "top_k")?),
            outer_top_k: opt(nonneg(1, "outer_top_k")?),
            min_weight: Some(nonneg(2, "min_weight×1000")? as f32 / 1000.0),
            layers: Some([nonneg(3, "layer_start")?, nonneg(4, "layer_end_exclusive")?]),
            rescale: Some(rescale.into()),
            min_k: None,
            swiglu_keep_experts: opt(nonneg(6, "swiglu_keep_experts")?),
            swiglu_keep_shared: opt(nonneg(7, "swiglu_keep_shared")?),
        })
    }

    /// Read a file: `.bin` → binary form, anything else TOML.
    pub fn read(path: &Path) -> Result<MoeConfig, MoeConfigError> {
        MoeConfig::parse(path, read_bytes(path)?)
    }

    /// Parse the bytes of file `path`: `.bin` → binary form, anything else TOML.
    pub fn parse(path: &Path, bytes: Vec<u8>) -> Result<MoeConfig, MoeConfigError> {
        let shown = path.display().to_string();
        if path.extension().is_some_and(|e| e == "bin") {
            return MoeConfig::from_bin(&bytes, &shown);
        }
        let text = String::from_utf8(bytes).map_err(|_| MoeConfigError::Parse {
            path: shown.clone(),
            msg: "not UTF-8 text".into(),
        })?;
        MoeConfig::from_toml(&text, &shown)
    }

    /// Validate against the model's expert layout `hp` and resolve to one setting per layer.
    pub fn resolve(&self, hp: &MoeShape, path: &str) -> Result<Vec<LayerMoe>, MoeConfigError> {
        let k = hp.n_expert_used as u32;
        let range = |field: &'static str, value: String, msg: String| MoeConfigError::Range {
            path: path.into(),
            field,
            value,
            msg,
        };
        for (field, v) in [("top_k", self.top_k), ("outer_top_k", self.outer_top_k)] {
            if let Some(x) = v {
                if x == 0 || x > k {
                    return Err(range(field, x.to_string(), format!("must be 1 to {k}")));
                }
            }
        }
        let rescale = match self.rescale.as_deref() {
            None | Some("l2") => Rescale::L2,
            Some("l1") => Rescale::L1,
            Some("none") => Rescale::None,
            Some(x) => return Err(range("rescale", x.into(), "must be none, l1 or l2".into())),
        };
        let min_weight = self.min_weight.unwrap_or(0.0);
        if !(min_weight.is_finite() && min_weight >= 0.0) {
            return Err(range(
                "min_weight",
                min_weight.to_string(),
                "must be ≥ 0".into(),
            ));
        }
        let min_k = self.min_k.unwrap_or(1);
        if min_k == 0 || min_k > k {
            return Err(range(
                "min_k",
                min_k.to_string(),
                format!("must be 1 to {k}"),
            ));
        }
        for (field, v) in [
            ("swiglu_keep_experts", self.swiglu_keep_experts),
            ("swiglu_keep_shared", self.swiglu_keep_shared),
        ] {
            if let Some(x) = v {
                if x > 128 {
                    return Err(range(field, x.to_string(), "must be 0 to 128".into()));
                }
            }
        }
        let [start, end] = self.layers.unwrap_or([0, hp.n_layer as u32]);
        if start > end {
            return Err(range(
                "layers",
                format!("[{start}, {end}]"),
                "the start must not be after the end".into(),
            ));
        }
        let keep = |x: Option<u32>| x.filter(|&v| v < 128).unwrap_or(0);
        Ok((0..hp.n_layer)
            .map(|l| {
                if hp.is_hash_layer(l) {
                    return LayerMoe::MODEL;
                }
                let inside = (l as u32) >= start && (l as u32) < end;
                let top_k = if inside { self.top_k } else { self.outer_top_k }.unwrap_or(0);
                LayerMoe {
                    top_k,
                    rescale,
                    min_weight: if inside { min_weight } else { 0.0 },
                    min_k,
                    keep_experts: keep(self.swiglu_keep_experts),
                    keep_shared: keep(self.swiglu_keep_shared),
                }
            })
            .collect())
    }
}

/// The bytes of a MoE config file (a regular file of at most [`crate::files::CONFIG_CAP`]).
fn read_bytes(path: &Path) -> Result<Vec<u8>, MoeConfigError> {
    crate::files::read_capped(path, crate::files::CONFIG_CAP, "MoE config").map_err(|e| {
        MoeConfigError::Io {
            path: path.display().to_string(),
            msg: e.to_string(),
        }
    })
}

/// Apply resolved settings to the knobs.
pub fn apply(knobs: &MoeKnobs, layers: &[LayerMoe]) {
    for (l, m) in layers.iter().enumerate() {
        knobs.set(l, *m);
    }
}

/// What a poll found.
#[derive(Debug, Clone, PartialEq)]
pub enum MoeEvent {
    /// A new configuration is in force (its text form for the log).
    Applied(String),
    /// The file changed but was rejected; the last good configuration stays.
    Rejected(String),
    /// The file disappeared: back to the model's own routing.
    Removed,
}

/// Watches a configuration file: one `stat` per call, the file read only while its
/// modification time or size differs from the configuration in force.
///
/// A change is applied only once two polls in a row have read the same bytes under the same
/// modification time and size: a file being rewritten in place (truncated, then written in
/// pieces) is never applied half-written or empty. Writing a new file and renaming it over
/// the old one (atomic) is still the recommended way; it is applied one poll later.
#[derive(Debug)]
pub struct MoeWatcher {
    path: PathBuf,
    seen: Option<(SystemTime, u64)>,
    /// A change read once, waiting to be read again identical.
    pending: Option<((SystemTime, u64), Vec<u8>)>,
    present: bool,
}

impl MoeWatcher {
    /// Watch `path` (it need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> MoeWatcher {
        MoeWatcher {
            path: path.into(),
            seen: None,
            pending: None,
            present: false,
        }
    }
    /// The watched path.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Check the file once (call between tokens) and update `knobs` when a change has
    /// settled (read identical twice, see the type docs).
    pub fn poll(&mut self, hp: &MoeShape, knobs: &MoeKnobs) -> Option<MoeEvent> {
        let meta = std::fs::metadata(&self.path).ok();
        let Some(meta) = meta else {
            self.pending = None;
            if self.present {
                self.present = false;
                self.seen = None;
                apply(knobs, &vec![LayerMoe::MODEL; hp.n_layer]);
                return Some(MoeEvent::Removed);
            }
            return None;
        };
        let stamp = (
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            meta.len(),
        );
        if self.seen == Some(stamp) {
            self.pending = None;
            return None;
        }
        let bytes = match read_bytes(&self.path) {
            Ok(b) => b,
            Err(e) => {
                // not readable as a config at all (not a regular file, too large): said once
                self.seen = Some(stamp);
                self.pending = None;
                self.present = true;
                return Some(MoeEvent::Rejected(e.to_string()));
            }
        };
        match &self.pending {
            Some((s, b)) if *s == stamp && *b == bytes => {}
            _ => {
                self.pending = Some((stamp, bytes));
                return None;
            }
        }
        self.pending = None;
        self.seen = Some(stamp);
        self.present = true;
        let shown = self.path.display().to_string();
        match MoeConfig::parse(&self.path, bytes)
            .and_then(|c| c.resolve(hp, &shown).map(|r| (c, r)))
        {
            Ok((c, layers)) => {
                apply(knobs, &layers);
                Some(MoeEvent::Applied(c.to_string()))
            }
            Err(e) => Some(MoeEvent::Rejected(e.to_string())),
        }
    }

    /// [`MoeWatcher::poll`] until the file is settled or seen changing (at most twice): at
    /// start-up, so that a configuration already in place applies from the first token.
    pub fn poll_now(&mut self, hp: &MoeShape, knobs: &MoeKnobs) -> Option<MoeEvent> {
        match self.poll(hp, knobs) {
            None if self.pending.is_some() => self.poll(hp, knobs),
            e => e,
        }
    }
}
