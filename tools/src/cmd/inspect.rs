//! `fathom inspect FILE [--json]`: what is in a model file, without reading its tensor data.
//!
//! Accepts a GGUF file (a split model: any shard's path, normally the first), a `.safetensors`
//! file, a `*.safetensors.index.json`, or a checkpoint directory. The format is chosen by the
//! file's magic bytes (`GGUF`), else by name. Both readers memory-map the files and parse only
//! the headers, so inspecting a multi-gigabyte model costs milliseconds and a few MB of
//! resident memory; the time to open and the resident memory (VmRSS / VmHWM) are reported at
//! the end (on stderr in text mode, as fields of the JSON document with `--json`).
//!
//! Everything is first gathered into one [`Report`]; the text and the JSON renderings are two
//! views of it, so they always carry the same information. Long metadata arrays are summarised
//! (`[string; 129280] ["<s>", "</s>", ...]`, in JSON: length + first items) and long strings cut.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use models::gguf::{self, GgufFile};
use models::safetensors::SafetensorsModel;
use serde_json::{json, Value as Json};

use crate::mem;

/// Arguments of `fathom inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A .gguf file (first shard of a split model), .safetensors file, safetensors index .json,
    /// or checkpoint directory.
    pub path: PathBuf,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Array elements shown in text output.
const TEXT_ARRAY_ITEMS: usize = 3;
/// Array elements kept in JSON output.
const JSON_ARRAY_ITEMS: usize = 8;
/// Characters of a string shown in text output.
const TEXT_STR_CHARS: usize = 64;
/// Characters of a string kept in JSON output.
const JSON_STR_CHARS: usize = 256;

/// One metadata entry, already summarised.
struct Meta {
    /// Key (for a sharded safetensors checkpoint, `index.`/`<shard file>.` prefixed where needed).
    key: String,
    /// Type name (`u32`, `string`, `array<string>`, ...).
    ty: String,
    /// Text form.
    text: String,
    /// JSON form.
    json: Json,
}

/// One tensor row.
struct Tensor {
    name: String,
    ty: String,
    shape: Vec<u64>,
    elements: u64,
    bytes: u64,
    /// Absolute byte offset in its shard file.
    offset: u64,
    shard: usize,
    /// Why the tensor cannot be used, if it cannot.
    note: Option<String>,
}

/// One file of the model.
struct Shard {
    path: PathBuf,
    bytes: u64,
    tensors: usize,
    /// Format-specific fields (`data_offset`, `header_len`, ...).
    fields: Vec<(&'static str, Json)>,
}

/// Everything `inspect` prints.
struct Report {
    path: PathBuf,
    format: &'static str,
    header: Vec<(&'static str, Json)>,
    shards: Vec<Shard>,
    metadata: Vec<Meta>,
    tensors: Vec<Tensor>,
    warnings: Vec<String>,
    open_time: Duration,
}

/// Run the subcommand.
pub fn run(args: &Args) -> Result<()> {
    let report = build(&args.path)?;
    let rss = mem::rss();
    let out = if args.json {
        let doc = to_json(&report, rss);
        let mut s = serde_json::to_string_pretty(&doc).context("serialising the report")?;
        s.push('\n');
        s
    } else {
        to_text(&report)
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // `fathom inspect big.gguf | head` closes the pipe early: not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(e).context("writing to stdout");
        }
        _ => {}
    }
    if !args.json {
        eprintln!(
            "opened in {:.3} ms; resident memory {} (peak {})",
            report.open_time.as_secs_f64() * 1e3,
            rss.current
                .map_or_else(|| "unknown".to_string(), human_bytes),
            rss.peak.map_or_else(|| "unknown".to_string(), human_bytes),
        );
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Gguf,
    Safetensors,
}

/// Decide the format: directories are safetensors checkpoints; files starting with `GGUF` or
/// named `*.gguf` are GGUF; everything else is tried as safetensors.
fn detect(path: &Path) -> Result<Kind> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot open {}", path.display()))?;
    if meta.is_dir() {
        return Ok(Kind::Safetensors);
    }
    let mut magic = [0u8; 4];
    let mut f = models::files::open_regular(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let n = f
        .read(&mut magic)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if magic[..n] == gguf::GGUF_MAGIC[..]
        || path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
    {
        Ok(Kind::Gguf)
    } else {
        Ok(Kind::Safetensors)
    }
}

fn build(path: &Path) -> Result<Report> {
    match detect(path)? {
        Kind::Gguf => build_gguf(path),
        Kind::Safetensors => build_safetensors(path),
    }
}

fn build_safetensors(path: &Path) -> Result<Report> {
    let t0 = Instant::now();
    let model = SafetensorsModel::open(path)
        .with_context(|| format!("cannot read {} as safetensors", path.display()))?;
    let open_time = t0.elapsed();

    let mut header = vec![
        ("tensors", json!(model.len())),
        ("shards", json!(model.shards().len())),
    ];
    if let Some(ix) = model.index_path() {
        header.push(("index", json!(ix.display().to_string())));
    }
    let shards = model
        .shards()
        .iter()
        .map(|s| Shard {
            path: s.path().to_path_buf(),
            bytes: s.file_len(),
            tensors: s.tensors().len(),
            fields: vec![
                ("header_len", json!(s.header_len())),
                ("data_offset", json!(s.data_start())),
            ],
        })
        .collect();

    let mut metadata = Vec::new();
    if let Some(Json::Object(m)) = model.index_metadata() {
        for (k, v) in m {
            metadata.push(json_meta(format!("index.{k}"), v));
        }
    } else if let Some(v) = model.index_metadata() {
        metadata.push(json_meta("index.metadata".into(), v));
    }
    // Shard metadata: shown once when all shards agree, else per shard.
    let first = model.metadata();
    let all_same = model.shards().iter().all(|s| s.metadata() == first);
    for (i, s) in model.shards().iter().enumerate() {
        if all_same && i > 0 {
            break;
        }
        let prefix = if all_same || model.shards().len() == 1 {
            String::new()
        } else {
            format!("{}:", file_name(s.path()))
        };
        for (k, v) in s.metadata() {
            metadata.push(str_meta(format!("{prefix}{k}"), v));
        }
    }

    let tensors = model
        .tensors()
        .map(|t| Tensor {
            name: t.name.clone(),
            ty: t.dtype.to_string(),
            shape: t.shape.clone(),
            elements: t.n_elements().unwrap_or(u64::MAX),
            bytes: t.byte_len(),
            offset: t.file_offset,
            shard: t.shard,
            note: t.unsupported_reason(),
        })
        .collect();
    Ok(Report {
        path: path.to_path_buf(),
        format: "safetensors",
        header,
        shards,
        metadata,
        tensors,
        warnings: model.warnings(),
        open_time,
    })
}

fn build_gguf(path: &Path) -> Result<Report> {
    let t0 = Instant::now();
    let file =
        GgufFile::open(path).with_context(|| format!("cannot read {} as GGUF", path.display()))?;
    let open_time = t0.elapsed();
    let header = vec![
        ("version", json!(file.version())),
        ("alignment", json!(file.alignment())),
        ("data_offset", json!(file.data_offset())),
        ("tensors", json!(file.tensors().len())),
        ("kv", json!(file.metadata().len())),
        ("shards", json!(file.shards().len())),
    ];
    let shards = file
        .shards()
        .iter()
        .map(|s| Shard {
            path: s.path().to_path_buf(),
            bytes: s.file_len(),
            tensors: s.tensor_count(),
            fields: vec![
                ("version", json!(s.version())),
                ("alignment", json!(s.alignment())),
                ("data_offset", json!(s.data_offset())),
                ("kv", json!(s.metadata().len())),
            ],
        })
        .collect();
    let metadata = file
        .metadata()
        .iter()
        .map(|(k, v)| {
            let (ty, text, json) = gguf_value(v);
            Meta {
                key: k.clone(),
                ty,
                text,
                json,
            }
        })
        .collect();
    let tensors = file
        .tensors()
        .iter()
        .map(|t| Tensor {
            name: t.name.clone(),
            ty: t.dtype.name().to_string(),
            shape: t.ne.clone(),
            elements: t.n_elements(),
            bytes: t.n_bytes,
            offset: file
                .shards()
                .get(t.shard)
                .map_or(0, gguf::Shard::data_offset)
                + t.offset,
            shard: t.shard,
            note: None,
        })
        .collect();
    Ok(Report {
        path: path.to_path_buf(),
        format: "gguf",
        header,
        shards,
        metadata,
        tensors,
        warnings: Vec::new(),
        open_time,
    })
}

/// (type name, text, JSON) of a GGUF metadata value.
fn gguf_value(v: &gguf::Value) -> (String, String, Json) {
    use gguf::Value as V;
    let scalar = |t: &str, s: String, j: Json| (t.to_string(), s, j);
    match v {
        V::U8(x) => scalar("u8", x.to_string(), json!(x)),
        V::I8(x) => scalar("i8", x.to_string(), json!(x)),
        V::U16(x) => scalar("u16", x.to_string(), json!(x)),
        V::I16(x) => scalar("i16", x.to_string(), json!(x)),
        V::U32(x) => scalar("u32", x.to_string(), json!(x)),
        V::I32(x) => scalar("i32", x.to_string(), json!(x)),
        V::U64(x) => scalar("u64", x.to_string(), json!(x)),
        V::I64(x) => scalar("i64", x.to_string(), json!(x)),
        V::F32(x) => scalar("f32", x.to_string(), json_f64(f64::from(*x))),
        V::F64(x) => scalar("f64", x.to_string(), json_f64(*x)),
        V::Bool(x) => scalar("bool", x.to_string(), json!(x)),
        V::Str(s) => scalar("string", text_str(s), json_str(s)),
        V::Array(a) => {
            let (t, j) = gguf_array(a);
            (format!("array<{}>", a.elem_type()), t, j)
        }
    }
}

/// Text and JSON summaries of a GGUF array (nested arrays summarised recursively).
fn gguf_array(a: &gguf::Array) -> (String, Json) {
    use gguf::Array as A;
    fn num<T: ToString + Copy>(ty: &str, v: &[T], j: impl Fn(T) -> Json) -> (String, Json) {
        summarise(ty, v, |x| x.to_string(), |x| j(*x))
    }
    match a {
        A::U8(v) => num("u8", v, |x| json!(x)),
        A::I8(v) => num("i8", v, |x| json!(x)),
        A::U16(v) => num("u16", v, |x| json!(x)),
        A::I16(v) => num("i16", v, |x| json!(x)),
        A::U32(v) => num("u32", v, |x| json!(x)),
        A::I32(v) => num("i32", v, |x| json!(x)),
        A::U64(v) => num("u64", v, |x| json!(x)),
        A::I64(v) => num("i64", v, |x| json!(x)),
        A::F32(v) => num("f32", v, |x| json_f64(f64::from(x))),
        A::F64(v) => num("f64", v, json_f64),
        A::Bool(v) => num("bool", v, |x| json!(x)),
        A::Str(v) => summarise("string", v, |s| text_str(s), |s| json_str(s)),
        A::Nested(v) => summarise("array", v, |x| gguf_array(x).0, |x| gguf_array(x).1),
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Cut a string to `max` characters, marking the cut.
fn cut(s: &str, max: usize) -> (String, bool) {
    match s.char_indices().nth(max) {
        Some((i, _)) => (s[..i].to_string(), true),
        None => (s.to_string(), false),
    }
}

fn text_str(s: &str) -> String {
    let (c, more) = cut(s, TEXT_STR_CHARS);
    if more {
        format!("{c:?}... ({} chars)", s.chars().count())
    } else {
        format!("{c:?}")
    }
}

fn json_str(s: &str) -> Json {
    let (c, more) = cut(s, JSON_STR_CHARS);
    if more {
        json!({"truncated": c, "chars": s.chars().count()})
    } else {
        Json::String(c)
    }
}

fn str_meta(key: String, v: &str) -> Meta {
    Meta {
        key,
        ty: "string".into(),
        text: text_str(v),
        json: json_str(v),
    }
}

/// Metadata from a JSON value (safetensors index `metadata`).
fn json_meta(key: String, v: &Json) -> Meta {
    let ty = match v {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    };
    let text = match v {
        Json::String(s) => text_str(s),
        other => {
            let s = other.to_string();
            let (c, more) = cut(&s, TEXT_STR_CHARS);
            if more {
                format!("{c}...")
            } else {
                c
            }
        }
    };
    Meta {
        key,
        ty: ty.into(),
        text,
        json: v.clone(),
    }
}

/// Text and JSON summaries of a list of items: `[ty; n] [a, b, ...]`.
fn summarise<T>(
    ty: &str,
    items: &[T],
    text: impl Fn(&T) -> String,
    json: impl Fn(&T) -> Json,
) -> (String, Json) {
    let shown: Vec<String> = items.iter().take(TEXT_ARRAY_ITEMS).map(&text).collect();
    let more = if items.len() > TEXT_ARRAY_ITEMS {
        ", ..."
    } else {
        ""
    };
    let t = format!("[{ty}; {}] [{}{more}]", items.len(), shown.join(", "));
    let j = json!({
        "element_type": ty,
        "len": items.len(),
        "first": items.iter().take(JSON_ARRAY_ITEMS).map(&json).collect::<Vec<_>>(),
    });
    (t, j)
}

fn json_f64(v: f64) -> Json {
    serde_json::Number::from_f64(v).map_or_else(|| Json::String(v.to_string()), Json::Number)
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// (tensor count, elements, bytes).
type Totals = (u64, u128, u128);

/// Totals by type name, and overall.
fn totals(r: &Report) -> (BTreeMap<&str, Totals>, Totals) {
    let mut by = BTreeMap::new();
    let mut all = (0u64, 0u128, 0u128);
    for t in &r.tensors {
        let e = by.entry(t.ty.as_str()).or_insert((0u64, 0u128, 0u128));
        for acc in [e, &mut all] {
            acc.0 += 1;
            acc.1 += u128::from(t.elements);
            acc.2 += u128::from(t.bytes);
        }
    }
    (by, all)
}

fn json_scalar(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn to_text(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "file:   {}", r.path.display());
    let _ = writeln!(o, "format: {}", r.format);
    for (k, v) in &r.header {
        let _ = writeln!(o, "{:<7} {}", format!("{k}:"), json_scalar(v));
    }
    let _ = writeln!(o, "\nshards ({}):", r.shards.len());
    for (i, s) in r.shards.iter().enumerate() {
        let fields: Vec<String> = s
            .fields
            .iter()
            .map(|(k, v)| format!("{k} {}", json_scalar(v)))
            .collect();
        let _ = writeln!(
            o,
            "  [{i}] {}  {} bytes ({}), {} tensors, {}",
            s.path.display(),
            s.bytes,
            human_bytes(s.bytes),
            s.tensors,
            fields.join(", ")
        );
    }
    let _ = writeln!(o, "\nmetadata ({} keys):", r.metadata.len());
    let kw = r.metadata.iter().map(|m| m.key.len()).max().unwrap_or(0);
    let tw = r.metadata.iter().map(|m| m.ty.len()).max().unwrap_or(0);
    for m in &r.metadata {
        let _ = writeln!(o, "  {:<kw$}  {:<tw$}  {}", m.key, m.ty, m.text);
    }

    let _ = writeln!(o, "\ntensors ({}):", r.tensors.len());
    let shape = |t: &Tensor| {
        format!(
            "[{}]",
            t.shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let nw = r
        .tensors
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let yw = r
        .tensors
        .iter()
        .map(|t| t.ty.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let sw = r
        .tensors
        .iter()
        .map(|t| shape(t).len())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(
        o,
        "  {:<nw$}  {:<yw$}  {:<sw$}  {:>14}  {:>14}  shard",
        "name", "type", "shape", "bytes", "offset"
    );
    for t in &r.tensors {
        let _ = write!(
            o,
            "  {:<nw$}  {:<yw$}  {:<sw$}  {:>14}  {:>14}  {:>5}",
            t.name,
            t.ty,
            shape(t),
            t.bytes,
            t.offset,
            t.shard
        );
        if let Some(n) = &t.note {
            let _ = write!(o, "  ({n})");
        }
        o.push('\n');
    }

    let (by, all) = totals(r);
    let _ = writeln!(o, "\ntotals by type:");
    let _ = writeln!(
        o,
        "  {:<yw$}  {:>7}  {:>16}  {:>16}",
        "type", "tensors", "elements", "bytes"
    );
    for (ty, (c, e, b)) in &by {
        let _ = writeln!(
            o,
            "  {ty:<yw$}  {c:>7}  {e:>16}  {b:>16}  ({})",
            human_bytes(u64::try_from(*b).unwrap_or(u64::MAX))
        );
    }
    let _ = writeln!(
        o,
        "  {:<yw$}  {:>7}  {:>16}  {:>16}  ({})",
        "all",
        all.0,
        all.1,
        all.2,
        human_bytes(u64::try_from(all.2).unwrap_or(u64::MAX))
    );
    if !r.warnings.is_empty() {
        let _ = writeln!(o, "\nwarnings ({}):", r.warnings.len());
        for w in &r.warnings {
            let _ = writeln!(o, "  {w}");
        }
    }
    o
}

fn to_json(r: &Report, rss: mem::Rss) -> Json {
    let (by, all) = totals(r);
    // Totals as numbers when they fit (always, in practice), else strings.
    let num = |v: u128| u64::try_from(v).map_or_else(|_| Json::String(v.to_string()), |v| json!(v));
    json!({
        "path": r.path.display().to_string(),
        "format": r.format,
        "header": r.header.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<serde_json::Map<_, _>>(),
        "shards": r.shards.iter().map(|s| {
            let mut m = serde_json::Map::new();
            m.insert("path".into(), json!(s.path.display().to_string()));
            m.insert("bytes".into(), json!(s.bytes));
            m.insert("tensors".into(), json!(s.tensors));
            for (k, v) in &s.fields {
                m.insert((*k).into(), v.clone());
            }
            Json::Object(m)
        }).collect::<Vec<_>>(),
        "metadata": r.metadata.iter().map(|m| json!({"key": m.key, "type": m.ty, "value": m.json})).collect::<Vec<_>>(),
        "tensors": r.tensors.iter().map(|t| {
            let mut v = json!({
                "name": t.name, "type": t.ty, "shape": t.shape, "elements": t.elements,
                "bytes": t.bytes, "offset": t.offset, "shard": t.shard,
            });
            if let Some(n) = &t.note {
                v["unsupported"] = json!(n);
            }
            v
        }).collect::<Vec<_>>(),
        "totals": {
            "by_type": by.iter().map(|(ty, (c, e, b))| json!({"type": ty, "tensors": c, "elements": num(*e), "bytes": num(*b)})).collect::<Vec<_>>(),
            "tensors": all.0,
            "elements": num(all.1),
            "bytes": num(all.2),
        },
        "warnings": r.warnings,
        "open_seconds": json_f64(r.open_time.as_secs_f64()),
        "rss_bytes": rss.current,
        "peak_rss_bytes": rss.peak,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        let toks: Vec<String> = ["<s>", "</s>", "a", "b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (t, j) = summarise("string", &toks, |s| format!("{s:?}"), |s| json!(s));
        assert_eq!(t, r#"[string; 4] ["<s>", "</s>", "a", ...]"#);
        assert_eq!(j["len"], 4);
        assert_eq!(j["first"].as_array().unwrap().len(), 4);
        let long = "x".repeat(1000);
        assert!(text_str(&long).ends_with("... (1000 chars)"));
        assert_eq!(json_str(&long)["chars"], 1000);
        assert_eq!(text_str("é"), "\"é\"");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_bytes(12), "12 B");
    }
}
