//! Byte-level BPE tokenizer for DeepSeek-V3/V4 models, built on the `tokenizers` crate.
//!
//! Two sources give the same tokenizer:
//!
//! * **GGUF metadata** ([`Tokenizer::from_gguf`]): `tokenizer.ggml.model` must be `"gpt2"`
//!   (byte-level BPE); `tokenizer.ggml.tokens` (string array, index = id),
//!   `tokenizer.ggml.merges` (string array `"left right"`, index = rank),
//!   `tokenizer.ggml.token_type` (optional i32 array: 1 normal, 2 unknown, 3 control,
//!   4 user-defined, 5 unused, 6 byte), `tokenizer.ggml.pre` (pre-tokenizer name, see below),
//!   `tokenizer.ggml.bos_token_id` / `eos_token_id` (optional, any integer type) and
//!   `tokenizer.ggml.add_bos_token` / `add_eos_token` (optional bools; absent means `false`,
//!   llama.cpp's default for BPE vocabularies). A [`tokenizers::Tokenizer`] is assembled
//!   programmatically: BPE model from vocab + merges, pre-tokenizer = the three DeepSeek-V3
//!   `Split` regexes ([`DEEPSEEK_V3_SPLITS`], verbatim from DeepSeek's `tokenizer.json`)
//!   followed by `ByteLevel(add_prefix_space = false, use_regex = false)`, ByteLevel decoder.
//!   Control tokens (type 3) are added as special tokens and user-defined tokens (type 4) as
//!   added tokens, so both are matched whole in the input text and never split; without a
//!   `token_type` array only BOS and EOS are treated as special.
//! * **A checkpoint directory** ([`Tokenizer::from_dir`]): `tokenizer.json` loaded with
//!   [`tokenizers::Tokenizer::from_file`], plus `tokenizer_config.json` (`bos_token`,
//!   `eos_token`, `add_bos_token`, `add_eos_token`) and, as a fallback for the ids,
//!   `generation_config.json` (`bos_token_id`, `eos_token_id`). Without a config,
//!   `add_bos_token` is inferred from the post-processor (does it prepend a special token?).
//!   The `tokenizer.json` post-processor itself is never run: BOS/EOS are added by
//!   [`Tokenizer::encode`] from the config, exactly once.
//!
//! # Pre-tokenizer names (`tokenizer.ggml.pre`)
//!
//! Accepted: `deepseek-v3`, `joyai-llm` and `hunyuan-dense` — llama.cpp maps all three to
//! the identical DeepSeek-V3 regex set (the dsv4-tiny fixtures write `deepseek-v3`, a public
//! V4 GGUF writes `joyai-llm`). **Not** accepted: `deepseek-llm` (DeepSeek LLM v1, a
//! different split: `[\r\n]`, letter runs with an optional leading space, `\p{N}+` whole
//! digit runs, …), `deepseek-coder`, `default` and every other name; they fail with
//! [`TokenizerError::UnsupportedPre`] naming the key and the value.
//!
//! # Encoding and decoding
//!
//! [`Tokenizer::encode`] always matches special/added tokens written in the text (so a chat
//! prompt formatted by [`crate::chat`] tokenizes its markers to their ids; text from an
//! untrusted user can therefore inject control tokens). Decoding is done by this module from
//! a per-id byte table so that [`Tokenizer::decode`] and the streaming [`TokenStreamer`]
//! agree byte for byte: a vocabulary token maps through the GPT-2 byte-to-unicode table; a
//! token with a character outside that table (e.g. `<｜begin▁of▁sentence｜>`) decodes to its
//! raw UTF-8 text, as the `tokenizers` ByteLevel decoder does; GGUF control and
//! user-defined tokens always decode to their raw text, as in llama.cpp. The concatenated
//! bytes are converted with [`String::from_utf8_lossy`] (invalid sequences become U+FFFD).
//!
//! Regex engine: `fancy-regex` (pure Rust, no Oniguruma C build). Its `\s`, `\p{L}`, … are
//! the Unicode properties of the `regex` crate; they agree with Oniguruma on all text the
//! fixtures cover, exotic whitespace code points might differ.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior};

use crate::gguf::{GgufError, GgufFile, Value};

/// GGUF key: tokenizer model family.
pub const KEY_MODEL: &str = "tokenizer.ggml.model";
/// GGUF key: pre-tokenizer name.
pub const KEY_PRE: &str = "tokenizer.ggml.pre";
/// GGUF key: token strings.
pub const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
/// GGUF key: BPE merges.
pub const KEY_MERGES: &str = "tokenizer.ggml.merges";
/// GGUF key: token types.
pub const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
/// GGUF key: BOS id.
pub const KEY_BOS_ID: &str = "tokenizer.ggml.bos_token_id";
/// GGUF key: EOS id.
pub const KEY_EOS_ID: &str = "tokenizer.ggml.eos_token_id";
/// GGUF key: whether to prepend BOS.
pub const KEY_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
/// GGUF key: whether to append EOS.
pub const KEY_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";

/// Pre-tokenizer names that use the DeepSeek-V3 split rules (llama.cpp `llama-vocab.cpp`).
pub const SUPPORTED_PRE: &[&str] = &["deepseek-v3", "joyai-llm", "hunyuan-dense"];

/// The DeepSeek-V3/V4 pre-tokenizer: three `Split` regexes (behaviour `Isolated`, not
/// inverted), applied in order, verbatim from the `pre_tokenizer` of DeepSeek's
/// `tokenizer.json` (digits in runs of at most 3; CJK/kana runs; the main
/// punctuation/letters/whitespace split).
pub const DEEPSEEK_V3_SPLITS: [&str; 3] = [
    "\\p{N}{1,3}",
    "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
];

/// GGUF token type: normal token.
pub const TOKEN_TYPE_NORMAL: i32 = 1;
/// GGUF token type: control token (BOS, EOS, chat markers).
pub const TOKEN_TYPE_CONTROL: i32 = 3;
/// GGUF token type: user-defined token (matched in text, not special).
pub const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// Errors from building or using a [`Tokenizer`]. Each names the metadata key or file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// A GGUF metadata key is missing or has the wrong type (the message names the key).
    #[error("tokenizer: {0}")]
    Gguf(#[from] GgufError),
    /// `tokenizer.ggml.model` is not `gpt2`.
    #[error(
        "tokenizer: unsupported {key} = {value:?} (only \"gpt2\" byte-level BPE is supported)"
    )]
    UnsupportedModel {
        /// The key.
        key: &'static str,
        /// The value found.
        value: String,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error("tokenizer: unsupported {key} = {value:?} (supported: {})", SUPPORTED_PRE.join(", "))]
    UnsupportedPre {
        /// The key.
        key: &'static str,
        /// The value found.
        value: String,
    },
    /// A metadata value is malformed (wrong length, id out of range, bad merge, ...).
    #[error("tokenizer: {key}: {message}")]
    BadMetadata {
        /// The key.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Reading a file failed.
    #[error("tokenizer: {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A JSON file could not be parsed, or a field in it is malformed.
    #[error("tokenizer: {}: {message}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The `tokenizers` crate rejected the assembled tokenizer.
    #[error("tokenizer: building the {what} failed: {message}")]
    Build {
        /// Which part (`"BPE model"`, `"pre-tokenizer"`).
        what: &'static str,
        /// The crate's message.
        message: String,
    },
    /// Encoding a text failed inside the `tokenizers` crate.
    #[error("tokenizer: encoding failed: {message}")]
    Encode {
        /// The crate's message.
        message: String,
    },
}

/// A byte-level BPE tokenizer with BOS/EOS policy and a decode table.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Decoded bytes of every id (index = id).
    pieces: Vec<Vec<u8>>,
    /// Whether each id is a special (control) token.
    special: Vec<bool>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    add_eos: bool,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.pieces.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .finish_non_exhaustive()
    }
}

/// GPT-2's byte-to-unicode table: byte → the character that stands for it in the vocab.
pub(crate) fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let cp = if printable {
            u32::from(b)
        } else {
            n += 1;
            255 + n
        };
        // All code points used are < 0x200, never surrogates.
        table[usize::from(b)] = char::from_u32(cp).unwrap_or('\u{FFFD}');
    }
    table
}

/// The inverse table: character → byte.
fn char_to_byte() -> HashMap<char, u8> {
    byte_to_char()
        .iter()
        .enumerate()
        .filter_map(|(b, &c)| u8::try_from(b).ok().map(|b| (c, b)))
        .collect()
}

/// Bytes a token stands for under the ByteLevel decoder rule: every character through the
/// byte table, or, if any character is outside it, the raw UTF-8 of the token.
fn byte_level_bytes(token: &str, table: &HashMap<char, u8>) -> Vec<u8> {
    token
        .chars()
        .map(|c| table.get(&c).copied())
        .collect::<Option<Vec<u8>>>()
        .unwrap_or_else(|| token.as_bytes().to_vec())
}

/// The DeepSeek-V3 pre-tokenizer as a `tokenizers` wrapper.
fn deepseek_v3_pre_tokenizer() -> Result<PreTokenizerWrapper, TokenizerError> {
    let mut parts = Vec::with_capacity(DEEPSEEK_V3_SPLITS.len() + 1);
    for re in DEEPSEEK_V3_SPLITS {
        let split = Split::new(
            SplitPattern::Regex(re.to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| TokenizerError::Build {
            what: "pre-tokenizer",
            message: e.to_string(),
        })?;
        parts.push(PreTokenizerWrapper::Split(split));
    }
    parts.push(PreTokenizerWrapper::ByteLevel(ByteLevel::new(
        false, true, false,
    )));
    Ok(PreTokenizerWrapper::Sequence(Sequence::new(parts)))
}

/// A non-negative integer metadata value that fits `u32`, if the key is present.
fn opt_id(gguf: &GgufFile, key: &'static str, n: usize) -> Result<Option<u32>, TokenizerError> {
    let Some(v) = gguf.get(key) else {
        return Ok(None);
    };
    let id = v
        .as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| TokenizerError::BadMetadata {
            key,
            message: format!("expected a non-negative integer id, found {v}"),
        })?;
    if usize::try_from(id).map_or(true, |i| i >= n) {
        return Err(TokenizerError::BadMetadata {
            key,
            message: format!("id {id} out of range for a vocabulary of {n} tokens"),
        });
    }
    Ok(Some(id))
}

/// An optional bool metadata value (absent → `false`).
fn opt_bool(gguf: &GgufFile, key: &'static str) -> Result<bool, TokenizerError> {
    match gguf.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(TokenizerError::BadMetadata {
            key,
            message: format!("expected bool, found {v}"),
        }),
    }
}

impl Tokenizer {
    /// Build the tokenizer from GGUF `tokenizer.ggml.*` metadata (see the module docs).
    pub fn from_gguf(gguf: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        let model = gguf.get_str(KEY_MODEL)?;
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel {
                key: KEY_MODEL,
                value: model.to_owned(),
            });
        }
        let pre = gguf.get_str(KEY_PRE)?;
        if !SUPPORTED_PRE.contains(&pre) {
            return Err(TokenizerError::UnsupportedPre {
                key: KEY_PRE,
                value: pre.to_owned(),
            });
        }
        let tokens = gguf.get_str_array(KEY_TOKENS)?;
        let n = tokens.len();
        if n == 0 || u32::try_from(n).is_err() {
            return Err(TokenizerError::BadMetadata {
                key: KEY_TOKENS,
                message: format!("{n} tokens (expected 1 to 4294967295)"),
            });
        }
        let merges_raw = gguf.get_str_array(KEY_MERGES)?;
        let types: Option<&[i32]> = match gguf.get(KEY_TOKEN_TYPE) {
            None => None,
            Some(_) => Some(gguf.get_i32_array(KEY_TOKEN_TYPE)?),
        };
        if let Some(t) = types {
            if t.len() != n {
                return Err(TokenizerError::BadMetadata {
                    key: KEY_TOKEN_TYPE,
                    message: format!("{} entries for {n} tokens", t.len()),
                });
            }
        }
        let bos = opt_id(gguf, KEY_BOS_ID, n)?;
        let eos = opt_id(gguf, KEY_EOS_ID, n)?;
        let add_bos = opt_bool(gguf, KEY_ADD_BOS)?;
        let add_eos = opt_bool(gguf, KEY_ADD_EOS)?;

        // Vocabulary: the first occurrence of a duplicated string keeps the string.
        let mut vocab = Vocab::default();
        for (id, tok) in (0u32..).zip(tokens.iter()) {
            vocab.entry(tok.clone()).or_insert(id);
        }
        // a byte-level BPE encodes any text only when every byte has its token: without
        // one, text holding that byte would be dropped from the prompt without a word
        if let Some((b, c)) = byte_to_char()
            .iter()
            .enumerate()
            .find(|(_, c)| !vocab.contains_key(&c.to_string()))
        {
            return Err(TokenizerError::BadMetadata {
                key: KEY_TOKENS,
                message: format!(
                    "no token for byte 0x{b:02x} ('{c}'): a byte-level vocabulary needs all 256 \
                     ({} distinct tokens of {n})",
                    vocab.len()
                ),
            });
        }
        let mut merges = Vec::with_capacity(merges_raw.len());
        for (rank, m) in merges_raw.iter().enumerate() {
            // llama.cpp: split at the first space after the first byte.
            let split = m
                .char_indices()
                .skip(1)
                .find(|&(_, c)| c == ' ')
                .map(|(i, _)| (&m[..i], &m[i + 1..]));
            match split {
                // llama.cpp keeps merges whose parts are not tokens (they never fire); the
                // `tokenizers` BPE builder rejects them, so they are dropped here
                Some((a, b)) if !b.is_empty() && !merge_known(&vocab, a, b) => {}
                Some((a, b)) if !b.is_empty() => merges.push((a.to_owned(), b.to_owned())),
                _ => {
                    return Err(TokenizerError::BadMetadata {
                        key: KEY_MERGES,
                        message: format!("merge {rank} {m:?} is not \"left right\""),
                    })
                }
            }
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| TokenizerError::Build {
                what: "BPE model",
                message: e.to_string(),
            })?;

        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(deepseek_v3_pre_tokenizer()?));
        inner.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::default())));

        let ty = |i: usize| types.and_then(|t| t.get(i).copied());
        let is_bos_eos = |i: usize| {
            let i = u32::try_from(i).ok();
            i.is_some() && (i == bos || i == eos)
        };
        let mut special = vec![false; n];
        let mut raw = vec![false; n];
        let mut specials = Vec::new();
        let mut user = Vec::new();
        for (i, tok) in tokens.iter().enumerate() {
            let t = ty(i);
            let is_control = t == Some(TOKEN_TYPE_CONTROL) || (types.is_none() && is_bos_eos(i));
            if is_control {
                special[i] = true;
                raw[i] = true;
                specials.push(AddedToken::from(tok.clone(), true));
            } else if t == Some(TOKEN_TYPE_USER_DEFINED) {
                raw[i] = true;
                user.push(AddedToken::from(tok.clone(), false).normalized(false));
            }
        }
        inner.add_special_tokens(&specials);
        inner.add_tokens(&user);

        let table = char_to_byte();
        let pieces = tokens
            .iter()
            .zip(&raw)
            .map(|(t, &r)| {
                if r {
                    t.as_bytes().to_vec()
                } else {
                    byte_level_bytes(t, &table)
                }
            })
            .collect();
        Ok(Tokenizer {
            inner,
            pieces,
            special,
            bos,
            eos,
            add_bos,
            add_eos,
        })
    }

    /// Load `tokenizer.json` (+ optional `tokenizer_config.json` / `generation_config.json`)
    /// from a checkpoint directory. `path` may also name the `tokenizer.json` file itself;
    /// the config files are then looked up beside it.
    pub fn from_dir(path: impl AsRef<Path>) -> Result<Tokenizer, TokenizerError> {
        let path = path.as_ref();
        let (dir, json) = if path.is_dir() {
            (path.to_path_buf(), path.join("tokenizer.json"))
        } else {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            (dir, path.to_path_buf())
        };
        let bytes =
            crate::files::read_capped(&json, crate::files::LARGE_JSON_CAP, "tokenizer file")
                .map_err(|source| TokenizerError::Io {
                    path: json.clone(),
                    source,
                })?;
        let mut inner =
            parse_tokenizer_json(&bytes).map_err(|message| TokenizerError::BadFile {
                path: json.clone(),
                message,
            })?;
        match inner.get_decoder() {
            Some(DecoderWrapper::ByteLevel(_)) => {}
            other => {
                return Err(TokenizerError::BadFile {
                    path: json,
                    message: format!(
                        "the decoder is {}; only a ByteLevel decoder is supported",
                        if other.is_some() {
                            "another kind"
                        } else {
                            "absent"
                        }
                    ),
                })
            }
        }

        let n = inner.get_vocab_size(true);
        if n == 0 || n > crate::deepseek4::hparams::MAX_VOCAB {
            return Err(TokenizerError::BadFile {
                path: json,
                message: format!(
                    "{n} token ids (1 to {} supported)",
                    crate::deepseek4::hparams::MAX_VOCAB
                ),
            });
        }
        let added = inner.get_added_tokens_decoder();
        let table = char_to_byte();
        let mut pieces = Vec::with_capacity(n);
        let mut special = vec![false; n];
        for (id, is_special) in (0u32..).zip(special.iter_mut()) {
            let piece = inner
                .id_to_token(id)
                .map(|t| byte_level_bytes(&t, &table))
                .unwrap_or_default();
            pieces.push(piece);
            *is_special = added.get(&id).is_some_and(|t| t.special);
        }

        let config = read_json_opt(&dir.join("tokenizer_config.json"))?;
        let gen = read_json_opt(&dir.join("generation_config.json"))?;
        let token_field = |key: &str| -> Option<String> {
            let v = config.as_ref()?.1.get(key)?;
            match v {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Object(o) => o.get("content")?.as_str().map(str::to_owned),
                _ => None,
            }
        };
        let id_for = |name: &str, gen_key: &str| -> Result<Option<u32>, TokenizerError> {
            if let Some(tok) = token_field(name) {
                let path = config.as_ref().map(|c| c.0.clone()).unwrap_or_default();
                return inner
                    .token_to_id(&tok)
                    .map(Some)
                    .ok_or_else(|| TokenizerError::BadFile {
                        path,
                        message: format!("{name} {tok:?} is not in the vocabulary"),
                    });
            }
            if let Some((path, g)) = &gen {
                if let Some(v) = g.get(gen_key) {
                    let id = v
                        .as_u64()
                        .and_then(|x| u32::try_from(x).ok())
                        .filter(|&x| usize::try_from(x).is_ok_and(|x| x < n));
                    return id.map(Some).ok_or_else(|| TokenizerError::BadFile {
                        path: path.clone(),
                        message: format!("{gen_key} {v} is not a valid token id"),
                    });
                }
            }
            Ok(None)
        };
        let mut bos = id_for("bos_token", "bos_token_id")?;
        let eos = id_for("eos_token", "eos_token_id")?;
        let cfg_bool = |key: &str| -> Result<Option<bool>, TokenizerError> {
            let Some((path, c)) = &config else {
                return Ok(None);
            };
            match c.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::Bool(b)) => Ok(Some(*b)),
                Some(v) => Err(TokenizerError::BadFile {
                    path: path.clone(),
                    message: format!("{key} is {v}, expected a bool"),
                }),
            }
        };
        let add_eos = cfg_bool("add_eos_token")?.unwrap_or(false);
        let add_bos = match cfg_bool("add_bos_token")? {
            Some(b) => b,
            None => {
                // Infer from the post-processor: does it prepend a special token? (Its
                // template may name a token it does not define, which panics in the crate.)
                let first = quietly(|| inner.encode("", true))
                    .map_err(|message| TokenizerError::BadFile {
                        path: json.clone(),
                        message: format!("its post-processor is malformed: {message}"),
                    })?
                    .ok()
                    .and_then(|e| e.get_ids().first().copied());
                match first {
                    Some(id) if usize::try_from(id).is_ok_and(|i| i < n && special[i]) => {
                        bos = bos.or(Some(id));
                        bos == Some(id)
                    }
                    _ => false,
                }
            }
        };
        // BOS and EOS are added by `encode` from the flags above; the crate's post-processor
        // is not used again (its template is not validated when read, and indexes
        // sequences and special tokens that may not exist).
        inner.with_post_processor(None::<tokenizers::processors::PostProcessorWrapper>);
        Ok(Tokenizer {
            inner,
            pieces,
            special,
            bos,
            eos,
            add_bos,
            add_eos,
        })
    }

    /// Encode `text` to token ids. Special and added tokens written in the text are matched
    /// whole. With `add_bos`, BOS is prepended if the model's metadata says
    /// `add_bos_token` (and EOS appended if it says `add_eos_token`); without it nothing is
    /// added.
    pub fn encode(&self, text: &str, add_bos: bool) -> Result<Vec<u32>, TokenizerError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| TokenizerError::Encode {
                message: e.to_string(),
            })?;
        let ids = enc.get_ids();
        let mut out = Vec::with_capacity(ids.len() + 2);
        if add_bos && self.add_bos {
            out.extend(self.bos);
        }
        out.extend_from_slice(ids);
        if add_bos && self.add_eos {
            out.extend(self.eos);
        }
        Ok(out)
    }

    /// The bytes token `id` decodes to (empty for an id outside the vocabulary).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.pieces.get(i))
            .map_or(&[], Vec::as_slice)
    }

    /// Decode ids to text, special tokens included as their text (ids outside the
    /// vocabulary are skipped; invalid UTF-8 becomes U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> String {
        self.decode_with(ids, false)
    }

    /// Decode ids to text; with `skip_special`, special (control) tokens are left out.
    pub fn decode_with(&self, ids: &[u32], skip_special: bool) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            if !(skip_special && self.is_special(id)) {
                bytes.extend_from_slice(self.token_bytes(id));
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// A streaming decoder over this tokenizer (special tokens included).
    pub fn streamer(&self) -> TokenStreamer<'_> {
        TokenStreamer::new(self)
    }

    /// The BOS id, if the model defines one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The EOS id, if the model defines one.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether [`Tokenizer::encode`] with `add_bos = true` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }

    /// Number of token ids (the embedding rows the model needs).
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The id of a token string: a special/added token's text, or a vocabulary entry in its
    /// byte-level form (`"Ġthe"` for `" the"`).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The string of token `id` (byte-level form for vocabulary entries).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Whether `id` is a special (control) token such as BOS, EOS or a chat marker.
    pub fn is_special(&self, id: u32) -> bool {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.special.get(i))
            .copied()
            .unwrap_or(false)
    }

    /// The underlying `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// A `tokenizer.json` parsed by the `tokenizers` crate. The JSON syntax is checked first, and
/// the crate's own parsing runs under `catch_unwind` with the panic message silenced: some
/// malformed files make it panic (found by fuzzing: an `expect` in its decoder deserializer;
/// a post-processor template naming a special token it does not define, which panics at
/// encode time), and a damaged file must be an error naming it, not a crash. (The panic hook is global:
/// a panic on another thread during these milliseconds would not be printed.)
fn parse_tokenizer_json(bytes: &[u8]) -> Result<tokenizers::Tokenizer, String> {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
        .map_err(|e| format!("not valid JSON: {e}"))?;
    match quietly(|| tokenizers::Tokenizer::from_bytes(bytes)) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(e.to_string()),
        Err(m) => Err(format!("malformed: {m}")),
    }
}

/// Run a call into the `tokenizers` crate that may panic on a malformed file, with the panic
/// caught and its message silenced; a panic becomes an error saying so.
fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r.map_err(|_| "the tokenizers library could not read it".to_owned())
}

/// A JSON object and the file it came from.
type JsonFile = (PathBuf, serde_json::Map<String, serde_json::Value>);

/// Read a JSON object file if it exists.
fn read_json_opt(path: &Path) -> Result<Option<JsonFile>, TokenizerError> {
    let bytes = match crate::files::read_capped(path, crate::files::CONFIG_CAP, "config file") {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TokenizerError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let bad = |message: String| TokenizerError::BadFile {
        path: path.to_path_buf(),
        message,
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(m)) => Ok(Some((path.to_path_buf(), m))),
        Ok(_) => Err(bad("expected a JSON object".to_owned())),
        Err(e) => Err(bad(e.to_string())),
    }
}

/// Incremental detokenizer: feed ids one at a time, get back only complete UTF-8 text.
///
/// Byte-level BPE tokens can end in the middle of a multi-byte character; the streamer holds
/// such bytes back until the character is complete. A byte sequence that can never become
/// valid is emitted as U+FFFD, exactly as [`String::from_utf8_lossy`] does, so the
/// concatenation of everything [`TokenStreamer::push`] and [`TokenStreamer::finish`] return
/// equals [`Tokenizer::decode`] of the same ids.
#[derive(Debug)]
pub struct TokenStreamer<'a> {
    tok: &'a Tokenizer,
    pending: Vec<u8>,
    skip_special: bool,
}

impl<'a> TokenStreamer<'a> {
    /// A streamer that renders special tokens as their text.
    pub fn new(tok: &'a Tokenizer) -> TokenStreamer<'a> {
        TokenStreamer {
            tok,
            pending: Vec::new(),
            skip_special: false,
        }
    }

    /// A streamer that goes on from bytes another one held back ([`TokenStreamer::into_pending`]),
    /// for a stream that outlives one borrow of the tokenizer (a server's generation step
    /// by step).
    pub fn resume(tok: &'a Tokenizer, pending: Vec<u8>) -> TokenStreamer<'a> {
        TokenStreamer {
            tok,
            pending,
            skip_special: false,
        }
    }

    /// The bytes held back, to [`TokenStreamer::resume`] from.
    pub fn into_pending(self) -> Vec<u8> {
        self.pending
    }

    /// Leave special (control) tokens out of the output.
    #[must_use]
    pub fn skip_special(mut self, skip: bool) -> TokenStreamer<'a> {
        self.skip_special = skip;
        self
    }

    /// Add one token; returns the text that became complete, if any.
    pub fn push(&mut self, id: u32) -> Option<String> {
        if self.skip_special && self.tok.is_special(id) {
            return None;
        }
        self.pending.extend_from_slice(self.tok.token_bytes(id));
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // `valid` bytes were checked just above.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                        None => {
                            self.pending.drain(..valid);
                            break;
                        }
                    }
                }
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Bytes held back waiting for the rest of a character.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// End of stream: flush held-back bytes (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        Some(s)
    }
}

/// Whether both parts of a merge and their concatenation are tokens.
fn merge_known(vocab: &Vocab, a: &str, b: &str) -> bool {
    vocab.contains_key(a) && vocab.contains_key(b) && vocab.contains_key(&format!("{a}{b}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_table_is_a_bijection() {
        let t = byte_to_char();
        let inv = char_to_byte();
        assert_eq!(inv.len(), 256);
        assert_eq!(t[usize::from(b' ')], 'Ġ');
        assert_eq!(t[usize::from(b'\n')], 'Ċ');
        assert_eq!(t[usize::from(b'a')], 'a');
        for (b, c) in t.iter().enumerate() {
            assert_eq!(usize::from(inv[c]), b);
        }
    }

    #[test]
    fn byte_level_fallback_to_raw() {
        let inv = char_to_byte();
        assert_eq!(byte_level_bytes("Ġthe", &inv), b" the");
        assert_eq!(
            byte_level_bytes("<｜User｜>", &inv),
            "<｜User｜>".as_bytes()
        );
    }

    #[test]
    fn splits_compile() {
        assert!(deepseek_v3_pre_tokenizer().is_ok());
    }
}
