//! The model's reply, parsed back: reasoning, text, and DSML tool calls.
//!
//! After the generation prompt the model writes (thinking on) `{reasoning}</think>` and then,
//! in both modes, `{content}` optionally followed by one tool-call block:
//!
//! ```text
//! \n\n<｜DSML｜tool_calls>
//! <｜DSML｜invoke name="get_weather">
//! <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
//! <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
//! </｜DSML｜invoke>
//! </｜DSML｜tool_calls>
//! ```
//!
//! [`ReplyParser`] takes the text as it is generated and returns events as soon as they are
//! certain: reasoning and content deltas (holding back only a tail that could still become a
//! marker), and each tool call once its block is complete. A block that does not parse (an
//! unknown tag, a missing close, a non-JSON `string="false"` value, a stream that ends inside
//! it) is returned as content text, never dropped. [`parse_reply`] is the whole-text form.

use super::{ToolCall, DSML_TOKEN};

/// One piece of a parsed reply.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplyEvent {
    /// More reasoning text.
    Reasoning(String),
    /// More answer text.
    Content(String),
    /// A complete tool call (its id is left empty: the server assigns one).
    ToolCall(ToolCall),
}

/// A parsed reply.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// The reasoning (thinking mode), if any.
    pub reasoning: String,
    /// The answer text.
    pub content: String,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
}

impl Reply {
    /// Add one event.
    pub fn push(&mut self, e: ReplyEvent) {
        match e {
            ReplyEvent::Reasoning(s) => self.reasoning.push_str(&s),
            ReplyEvent::Content(s) => self.content.push_str(&s),
            ReplyEvent::ToolCall(c) => self.tool_calls.push(c),
        }
    }
}

/// Parse a whole reply (the text after the generation prompt).
pub fn parse_reply(text: &str, thinking: bool) -> Reply {
    let mut p = ReplyParser::new(thinking);
    let mut r = Reply::default();
    for e in p.push(text) {
        r.push(e);
    }
    for e in p.finish() {
        r.push(e);
    }
    r
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Reasoning,
    Content,
    Tools,
}

const THINK_END: &str = "</think>";

fn block_start() -> String {
    format!("<{DSML_TOKEN}tool_calls>")
}

fn block_end() -> String {
    format!("</{DSML_TOKEN}tool_calls>")
}

/// Incremental reply parser (see the module docs).
#[derive(Debug)]
pub struct ReplyParser {
    state: State,
    pending: String,
    start: String,
    end: String,
}

/// The length of the longest suffix of `s` that is a proper prefix of one of `markers`
/// (text that must be held back because it may still become a marker; also used for stop
/// strings by the server).
pub fn held_back(s: &str, markers: &[&str]) -> usize {
    let mut best = 0;
    for m in markers {
        for (i, _) in s.char_indices() {
            let tail = &s[i..];
            if tail.len() < m.len() && m.starts_with(tail) {
                best = best.max(tail.len());
                break;
            }
        }
    }
    best
}

impl ReplyParser {
    /// A parser for a reply generated with thinking on (starts in reasoning) or off.
    pub fn new(thinking: bool) -> ReplyParser {
        ReplyParser {
            state: if thinking {
                State::Reasoning
            } else {
                State::Content
            },
            pending: String::new(),
            start: block_start(),
            end: block_end(),
        }
    }

    /// Feed more generated text; returns the events it completes.
    pub fn push(&mut self, text: &str) -> Vec<ReplyEvent> {
        self.pending.push_str(text);
        let mut out = Vec::new();
        loop {
            match self.state {
                State::Reasoning => {
                    // Reasoning ends at </think>, or at a tool-call block written without it.
                    let think = self.pending.find(THINK_END);
                    let block = self.pending.find(&self.start);
                    match (think, block) {
                        (Some(t), b) if b.is_none_or(|b| t < b) => {
                            let r: String = self.pending.drain(..t).collect();
                            self.pending.drain(..THINK_END.len());
                            emit(&mut out, ReplyEvent::Reasoning(r));
                            self.state = State::Content;
                        }
                        (_, Some(b)) => {
                            let r = self.pending[..b]
                                .strip_suffix("\n\n")
                                .unwrap_or(&self.pending[..b])
                                .to_owned();
                            self.pending.drain(..b);
                            emit(&mut out, ReplyEvent::Reasoning(r));
                            self.state = State::Tools;
                        }
                        _ => {
                            let with_gap = format!("\n\n{}", self.start);
                            let keep =
                                held_back(&self.pending, &[THINK_END, &self.start, &with_gap]);
                            let n = self.pending.len() - keep;
                            let r: String = self.pending.drain(..n).collect();
                            emit(&mut out, ReplyEvent::Reasoning(r));
                            return out;
                        }
                    }
                }
                State::Content => match self.pending.find(&self.start) {
                    Some(b) => {
                        let c = self.pending[..b]
                            .strip_suffix("\n\n")
                            .unwrap_or(&self.pending[..b])
                            .to_owned();
                        self.pending.drain(..b);
                        emit(&mut out, ReplyEvent::Content(c));
                        self.state = State::Tools;
                    }
                    None => {
                        let with_gap = format!("\n\n{}", self.start);
                        let keep = held_back(&self.pending, &[&self.start, &with_gap]);
                        let n = self.pending.len() - keep;
                        let c: String = self.pending.drain(..n).collect();
                        emit(&mut out, ReplyEvent::Content(c));
                        return out;
                    }
                },
                State::Tools => {
                    let Some(e) = self.pending.find(&self.end) else {
                        return out;
                    };
                    let block_len = e + self.end.len();
                    let block: String = self.pending.drain(..block_len).collect();
                    match parse_block(&block) {
                        Some(calls) => out.extend(calls.into_iter().map(ReplyEvent::ToolCall)),
                        None => emit(&mut out, ReplyEvent::Content(block)),
                    }
                    self.state = State::Content;
                }
            }
        }
    }

    /// The end of the reply: whatever was held back, as the text it is (an unfinished
    /// tool-call block becomes content).
    pub fn finish(&mut self) -> Vec<ReplyEvent> {
        let rest = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        match self.state {
            State::Reasoning => emit(&mut out, ReplyEvent::Reasoning(rest)),
            State::Content | State::Tools => emit(&mut out, ReplyEvent::Content(rest)),
        }
        self.state = State::Content;
        out
    }
}

/// Push a text event unless it is empty.
fn emit(out: &mut Vec<ReplyEvent>, e: ReplyEvent) {
    match &e {
        ReplyEvent::Reasoning(s) | ReplyEvent::Content(s) if s.is_empty() => {}
        _ => out.push(e),
    }
}

/// A cursor over a block's text.
struct Cursor<'a> {
    s: &'a str,
}

impl<'a> Cursor<'a> {
    fn ws(&mut self) {
        self.s = self.s.trim_start_matches([' ', '\n', '\r', '\t']);
    }

    fn lit(&mut self, l: &str) -> Option<()> {
        self.s = self.s.strip_prefix(l)?;
        Some(())
    }

    /// Text up to `l` (not included), then past it.
    fn until(&mut self, l: &str) -> Option<&'a str> {
        let i = self.s.find(l)?;
        let v = &self.s[..i];
        self.s = &self.s[i + l.len()..];
        Some(v)
    }
}

/// Parse one complete `<｜DSML｜tool_calls>…</｜DSML｜tool_calls>` block; `None` if it is
/// malformed in any way.
fn parse_block(block: &str) -> Option<Vec<ToolCall>> {
    let d = DSML_TOKEN;
    let invoke = format!("<{d}invoke name=\"");
    let invoke_end = format!("</{d}invoke>");
    let param = format!("<{d}parameter name=\"");
    let param_end = format!("</{d}parameter>");
    let mut c = Cursor { s: block };
    c.lit(&block_start())?;
    let mut calls = Vec::new();
    loop {
        c.ws();
        if c.lit(&block_end()).is_some() {
            break;
        }
        c.lit(&invoke)?;
        let name = c.until("\">")?;
        if name.is_empty() || name.contains(['<', '>', '"', '\n']) {
            return None;
        }
        let mut arguments = serde_json::Map::new();
        loop {
            c.ws();
            if c.lit(&invoke_end).is_some() {
                break;
            }
            c.lit(&param)?;
            let key = c.until("\" string=\"")?;
            if key.is_empty() || key.contains(['<', '>', '"', '\n']) {
                return None;
            }
            let is_string = match c.until("\">")? {
                "true" => true,
                "false" => false,
                _ => return None,
            };
            let raw = c.until(&param_end)?;
            let value = if is_string {
                serde_json::Value::String(raw.to_owned())
            } else {
                serde_json::from_str(raw.trim()).ok()?
            };
            arguments.insert(key.to_owned(), value);
        }
        calls.push(ToolCall {
            id: String::new(),
            name: name.to_owned(),
            arguments,
        });
    }
    if calls.is_empty() {
        return None;
    }
    Some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::render_tool_calls;
    use serde_json::json;

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: String::new(),
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn round_trips_rendered_calls() {
        let calls = vec![
            call(
                "get_weather",
                // (a float serde_json's default parser reads 1 ulp off: found by fuzzing; the
                // workspace enables its float_roundtrip feature)
                json!({"city": "Paris", "days": 3, "units": ["c", "f"], "x": 3.777776777777778e86}),
            ),
            call("now", json!({})),
        ];
        let text = format!("Let me check.{}", render_tool_calls(&calls));
        let r = parse_reply(&text, false);
        assert_eq!(r.content, "Let me check.");
        assert_eq!(r.tool_calls, calls);
        assert!(r.reasoning.is_empty());
    }

    #[test]
    fn thinking_then_content() {
        let r = parse_reply("hmm, 2+2\n</think>It is 4.", true);
        assert_eq!(r.reasoning, "hmm, 2+2\n");
        assert_eq!(r.content, "It is 4.");
    }

    #[test]
    fn reasoning_straight_into_tools() {
        let calls = vec![call("f", json!({"a": "b"}))];
        let text = format!("think{}", render_tool_calls(&calls));
        let r = parse_reply(&text, true);
        assert_eq!(r.reasoning, "think");
        assert_eq!(r.tool_calls, calls);
    }

    #[test]
    fn malformed_blocks_are_text() {
        let d = DSML_TOKEN;
        for bad in [
            format!("<{d}tool_calls>\n<{d}invoke name=\"f\">\n<{d}parameter name=\"x\" string=\"false\">not json</{d}parameter>\n</{d}invoke>\n</{d}tool_calls>"),
            format!("<{d}tool_calls>\n<{d}invoke name=\"f\">\n</{d}tool_calls>"),
            format!("<{d}tool_calls>\n<{d}bogus/>\n</{d}tool_calls>"),
            format!("<{d}tool_calls>\n</{d}tool_calls>"),
            format!("<{d}tool_calls>\n<{d}invoke name=\"f\">\n<{d}parameter name=\"x\" string=\"maybe\">1</{d}parameter>\n</{d}invoke>\n</{d}tool_calls>"),
        ] {
            let r = parse_reply(&format!("A{bad}B"), false);
            assert!(r.tool_calls.is_empty(), "{bad}");
            assert_eq!(r.content, format!("A{bad}B"));
        }
        // Unfinished at the end of the stream.
        let cut = format!("x\n\n<{d}tool_calls>\n<{d}invoke name=\"f\">");
        let r = parse_reply(&cut, false);
        assert_eq!(
            r.content,
            format!("x<{d}tool_calls>\n<{d}invoke name=\"f\">")
        );
    }

    /// Every split of the text into two pushes gives the same reply as one push, and no
    /// event ever carries a partial marker.
    #[test]
    fn streaming_matches_whole_text_at_every_split() {
        let calls = vec![call("get", json!({"q": "a<b", "n": 1.5}))];
        for thinking in [false, true] {
            let text = format!(
                "{}Answer: <x>\n\n{}tail",
                if thinking { "r1 </thin r2</think>" } else { "" },
                render_tool_calls(&calls)
            );
            let whole = parse_reply(&text, thinking);
            assert_eq!(whole.tool_calls, calls);
            let idx: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            for &i in &idx {
                let mut p = ReplyParser::new(thinking);
                let mut r = Reply::default();
                for e in p.push(&text[..i]).into_iter().chain(p.push(&text[i..])) {
                    if let ReplyEvent::Content(s) | ReplyEvent::Reasoning(s) = &e {
                        assert!(!s.contains(DSML_TOKEN), "split {i}: {s:?}");
                    }
                    r.push(e);
                }
                for e in p.finish() {
                    r.push(e);
                }
                assert_eq!(r, whole, "split at {i}");
            }
        }
    }

    #[test]
    fn plain_text_is_streamed_without_delay() {
        let mut p = ReplyParser::new(false);
        assert_eq!(p.push("Hello"), vec![ReplyEvent::Content("Hello".into())]);
        // A trailing newline may start "\n\n<｜DSML｜…": held until the next text.
        assert_eq!(
            p.push(" world\n"),
            vec![ReplyEvent::Content(" world".into())]
        );
        assert_eq!(p.push("ok"), vec![ReplyEvent::Content("\nok".into())]);
    }
}
