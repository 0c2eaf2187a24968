//! The DeepSeek-V4 chat format: prompts rendered from messages, and the model's replies parsed
//! back into reasoning, text and tool calls ([`dsml`]).
//!
//! Implemented from llama.cpp's `models/templates/deepseek-ai-DeepSeek-V4.jinja` (the
//! template the converter embeds for V4; spec `deepseek4.md` §11), without a Jinja engine:
//!
//! ```text
//! {BOS}{system prompt}                         all system messages, joined by "\n\n", then the
//!                                              tool header + schemas + footer when tools are given
//! <｜User｜>{user}                              consecutive user/tool messages share one
//!                                              <｜User｜>, separated by "\n\n"
//! <｜User｜><tool_result>{tool}</tool_result>   a tool message (inside a user turn); a run of
//!                                              them is ordered by the preceding assistant's
//!                                              tool-call order (matched by call id)
//! <｜Assistant｜></think>{content}[DSML]<｜end▁of▁sentence｜>          reasoning dropped
//! <｜Assistant｜><think>{reasoning}</think>{content}[DSML]<｜end▁of▁sentence｜>
//!                                              reasoning kept: thinking on and (tools given, a
//!                                              tool message anywhere, or the message comes
//!                                              after the last user/tool message)
//! [DSML] = "\n\n<｜DSML｜tool_calls>\n" + per call `<｜DSML｜invoke name="N">\n` + per
//!          argument `<｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>\n` (a
//!          string, as is) or `string="false">{JSON}` + `</｜DSML｜invoke>\n`, then
//!          `</｜DSML｜tool_calls>`
//! generation prompt: <｜Assistant｜></think> (thinking off) or <｜Assistant｜><think> (on)
//! ```
//!
//! JSON (tool schemas, non-string arguments, the response format) is written as the
//! template's `tojson` writes it: Python's `json.dumps` layout (`", "` and `": "`, keys in
//! their given order, non-ASCII as is) — see [`json::dumps`].
//!
//! The rendered string starts with the BOS text, so encode it with
//! [`Tokenizer::encode`]`(text, false)` (no second BOS); the markers are matched as special
//! tokens by the tokenizer. Some llama.cpp forks end a non-thinking generation prompt with
//! `<think></think>` instead of `</think>`; this module follows mainline and the spec.
//! `developer` messages (rendered like user messages by the template) can be passed as
//! [`Role::User`]. A GGUF `tokenizer.chat_template` is not executed;
//! [`looks_like_deepseek_v4`] only recognises it.
//!
//! **Fallback for vocabularies without the markers** ([`ChatTemplate::for_tokenizer`]):
//! the tiny test models only know BOS and EOS. A marker whose text is not a token of the
//! vocabulary is replaced by plain text: `<｜User｜>` → `"User: "`, `<｜Assistant｜>` →
//! `"\n\nAssistant: "`, the end-of-turn `<｜end▁of▁sentence｜>` → `"\n\n"`, and a missing BOS
//! is left out; a non-empty system prompt is then followed by `"\n\n"`. Missing `<think>` /
//! `</think>` are dropped in non-thinking mode and written as plain text in thinking mode.
//! [`ChatTemplate::missing_tokens`] lists what was replaced. The DSML markup is plain text
//! in every vocabulary (`｜DSML｜` is one token in V4's).
//!
//! [`Tokenizer::encode`]: crate::tokenizer::Tokenizer::encode

pub mod dsml;
pub mod json;

use crate::tokenizer::Tokenizer;

/// `<｜begin▁of▁sentence｜>` (BOS, id 0 in DeepSeek-V4).
pub const BOS_TOKEN: &str = "<｜begin▁of▁sentence｜>";
/// `<｜end▁of▁sentence｜>` (EOS, id 1); ends every assistant turn.
pub const EOS_TOKEN: &str = "<｜end▁of▁sentence｜>";
/// `<｜User｜>`: starts a user turn.
pub const USER_TOKEN: &str = "<｜User｜>";
/// `<｜Assistant｜>`: starts an assistant turn.
pub const ASSISTANT_TOKEN: &str = "<｜Assistant｜>";
/// `<think>`: opens the reasoning block (thinking mode).
pub const THINK_START_TOKEN: &str = "<think>";
/// `</think>`: closes the reasoning block; alone it selects non-thinking mode.
pub const THINK_END_TOKEN: &str = "</think>";

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// System prompt (all system messages are collected at the start).
    System,
    /// The user (also use this for `developer` messages).
    User,
    /// The model.
    Assistant,
    /// A tool result, rendered as `<tool_result>…</tool_result>` inside a user turn.
    Tool,
}

/// A tool call written by the assistant (OpenAI `tool_calls[i]`, Anthropic `tool_use`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The call id (`call_…`, `toolu_…`); matches a later [`Message::tool_call_id`].
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments, in the order given.
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// One chat message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The author.
    pub role: Role,
    /// The text.
    pub content: String,
    /// Reasoning of an assistant message (rendered only where the template keeps it).
    pub reasoning: Option<String>,
    /// Tool calls of an assistant message, rendered as a DSML block after its content.
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the id of the call it answers (orders a run of results).
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message with `role` and `content`, no reasoning or tool calls.
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            reasoning: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new(Role::Assistant, content)
    }

    /// A tool-result message.
    pub fn tool(content: impl Into<String>) -> Message {
        Message::new(Role::Tool, content)
    }
}

/// Rendering options.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatOptions {
    /// End with the assistant header so that the model writes the next turn.
    pub add_generation_prompt: bool,
    /// Thinking mode (`<think>`); off by default, as in the template.
    pub thinking: bool,
    /// Keep the reasoning of every assistant message in thinking mode (the template's
    /// `drop_thinking = false`); by default earlier turns' reasoning is dropped.
    pub keep_all_reasoning: bool,
    /// Tool definitions: OpenAI `function` objects (`name`, `description`, `parameters`),
    /// rendered into the system prompt as JSON schemas.
    pub tools: Vec<serde_json::Value>,
    /// A response format (JSON schema) appended to the system prompt.
    pub response_format: Option<serde_json::Value>,
    /// `reasoning_effort: max`: the template's preamble asking for exhaustive reasoning
    /// (thinking mode only).
    pub reasoning_effort_max: bool,
}

impl Default for ChatOptions {
    fn default() -> Self {
        ChatOptions {
            add_generation_prompt: true,
            thinking: false,
            keep_all_reasoning: false,
            tools: Vec::new(),
            response_format: None,
            reasoning_effort_max: false,
        }
    }
}

/// The DSML marker (`｜DSML｜`, one token in V4's vocabulary).
pub const DSML_TOKEN: &str = "｜DSML｜";

const REASONING_EFFORT_MAX: &str = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

const RESPONSE_FORMAT_HEADER: &str =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

const TOOLS_FOOTER: &str =
    "\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

/// The template's tool header (it names the DSML markup and the thinking markers).
fn tools_header() -> String {
    let d = DSML_TOKEN;
    format!(
        "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can \
         invoke tools by writing a \"<{d}tool_calls>\" block like the following:\n\n\
         <{d}tool_calls>\n<{d}invoke name=\"$TOOL_NAME\">\n<{d}parameter name=\"$PARAMETER_NAME\" \
         string=\"true|false\">$PARAMETER_VALUE</{d}parameter>\n...\n</{d}invoke>\n\
         <{d}invoke name=\"$TOOL_NAME2\">\n...\n</{d}invoke>\n</{d}tool_calls>\n\n\
         String parameters should be specified as is and set `string=\"true\"`. For all other \
         types (numbers, booleans, arrays, objects), pass the value in JSON format and set \
         `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you MUST \
         output your complete reasoning inside <think>...</think> BEFORE any tool calls or final \
         response.\n\nOtherwise, output directly after </think> with tool calls or final \
         response.\n\n### Available Tool Schemas\n\n"
    )
}

/// The DSML block of an assistant message's tool calls (with its leading blank line).
pub fn render_tool_calls(calls: &[ToolCall]) -> String {
    let d = DSML_TOKEN;
    let mut out = format!("\n\n<{d}tool_calls>\n");
    for c in calls {
        out.push_str(&format!("<{d}invoke name=\"{}\">\n", c.name));
        for (k, v) in &c.arguments {
            match v {
                serde_json::Value::String(s) => out.push_str(&format!(
                    "<{d}parameter name=\"{k}\" string=\"true\">{s}</{d}parameter>\n"
                )),
                v => out.push_str(&format!(
                    "<{d}parameter name=\"{k}\" string=\"false\">{}</{d}parameter>\n",
                    json::dumps(v)
                )),
            }
        }
        if c.arguments.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("</{d}invoke>\n"));
    }
    out.push_str(&format!("</{d}tool_calls>"));
    out
}

/// The marker strings a template renders with (special tokens, or plain-text fallbacks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatTemplate {
    bos: String,
    user: String,
    assistant: String,
    end_of_turn: String,
    think_start: Option<String>,
    think_end: Option<String>,
    system_separator: String,
    missing: Vec<&'static str>,
}

impl Default for ChatTemplate {
    fn default() -> Self {
        ChatTemplate::deepseek_v4()
    }
}

impl ChatTemplate {
    /// The DeepSeek-V4 template with all of its special tokens.
    pub fn deepseek_v4() -> ChatTemplate {
        ChatTemplate {
            bos: BOS_TOKEN.to_owned(),
            user: USER_TOKEN.to_owned(),
            assistant: ASSISTANT_TOKEN.to_owned(),
            end_of_turn: EOS_TOKEN.to_owned(),
            think_start: Some(THINK_START_TOKEN.to_owned()),
            think_end: Some(THINK_END_TOKEN.to_owned()),
            system_separator: String::new(),
            missing: Vec::new(),
        }
    }

    /// The DeepSeek-V4 template, with plain-text fallbacks for each marker that `tok`'s
    /// vocabulary lacks (see the module docs). BOS/EOS use the tokenizer's own BOS/EOS
    /// token text when it defines them.
    pub fn for_tokenizer(tok: &Tokenizer) -> ChatTemplate {
        let mut t = ChatTemplate::deepseek_v4();
        let has = |s: &str| tok.token_to_id(s).is_some();
        let text_of = |id: Option<u32>| id.and_then(|i| tok.id_to_token(i));
        match text_of(tok.bos()) {
            Some(b) => t.bos = b,
            None if has(BOS_TOKEN) => {}
            None => {
                t.bos = String::new();
                t.missing.push(BOS_TOKEN);
            }
        }
        match text_of(tok.eos()) {
            Some(e) => t.end_of_turn = e,
            None if has(EOS_TOKEN) => {}
            None => {
                t.end_of_turn = "\n\n".to_owned();
                t.missing.push(EOS_TOKEN);
            }
        }
        if !has(USER_TOKEN) {
            t.user = "User: ".to_owned();
            t.missing.push(USER_TOKEN);
        }
        if !has(ASSISTANT_TOKEN) {
            t.assistant = "\n\nAssistant: ".to_owned();
            t.missing.push(ASSISTANT_TOKEN);
        }
        if !has(USER_TOKEN) || !has(ASSISTANT_TOKEN) {
            t.system_separator = "\n\n".to_owned();
        }
        if !has(THINK_START_TOKEN) {
            t.think_start = None;
            t.missing.push(THINK_START_TOKEN);
        }
        if !has(THINK_END_TOKEN) {
            t.think_end = None;
            t.missing.push(THINK_END_TOKEN);
        }
        t
    }

    /// The special-token markers that were replaced by plain-text fallbacks (empty for the
    /// full DeepSeek-V4 vocabulary).
    pub fn missing_tokens(&self) -> &[&'static str] {
        &self.missing
    }

    /// Whether any marker is a plain-text fallback.
    pub fn uses_fallback(&self) -> bool {
        !self.missing.is_empty()
    }

    /// `</think>` if the vocabulary has it; in thinking mode the plain text otherwise.
    fn think_end(&self, thinking: bool) -> &str {
        match (&self.think_end, thinking) {
            (Some(s), _) => s,
            (None, true) => THINK_END_TOKEN,
            (None, false) => "",
        }
    }

    /// `<think>` (only used in thinking mode; plain text if the vocabulary lacks it).
    fn think_start(&self) -> &str {
        self.think_start.as_deref().unwrap_or(THINK_START_TOKEN)
    }

    /// The system prompt: system messages joined by a blank line, then the tool schemas and
    /// the response format, as the template builds it.
    fn system_prompt(messages: &[Message], opts: &ChatOptions) -> String {
        let mut sp: Option<String> = None;
        for m in messages.iter().filter(|m| m.role == Role::System) {
            match &mut sp {
                None => sp = Some(m.content.clone()),
                Some(s) => {
                    s.push_str("\n\n");
                    s.push_str(&m.content);
                }
            }
        }
        let mut sp = sp.unwrap_or_default();
        if !opts.tools.is_empty() {
            let mut schemas = String::new();
            for t in &opts.tools {
                schemas.push_str(&json::dumps(t));
                schemas.push('\n');
            }
            if !sp.is_empty() {
                sp.push_str("\n\n");
            }
            sp.push_str(&tools_header());
            sp.push_str(&schemas);
            sp.push_str(TOOLS_FOOTER);
        }
        if let Some(rf) = &opts.response_format {
            if !sp.is_empty() {
                sp.push_str("\n\n");
            }
            sp.push_str(RESPONSE_FORMAT_HEADER);
            sp.push_str(&json::dumps(rf));
        }
        sp
    }

    /// Render `messages` as one prompt string.
    pub fn render(&self, messages: &[Message], opts: &ChatOptions) -> String {
        let messages = sort_tool_results(messages);
        let mut out = String::new();
        out.push_str(&self.bos);
        if !messages.is_empty() && opts.thinking && opts.reasoning_effort_max {
            out.push_str(REASONING_EFFORT_MAX);
        }
        let system = Self::system_prompt(&messages, opts);
        out.push_str(&system);
        if !system.is_empty() {
            out.push_str(&self.system_separator);
        }
        let last_user = messages
            .iter()
            .rposition(|m| matches!(m.role, Role::User | Role::Tool));
        let any_tool_message = messages.iter().any(|m| m.role == Role::Tool);
        let mut in_user = false;
        for (i, m) in messages.iter().enumerate() {
            match m.role {
                Role::System => {}
                Role::User | Role::Tool => {
                    if in_user {
                        out.push_str("\n\n");
                    } else {
                        out.push_str(&self.user);
                        in_user = true;
                    }
                    if m.role == Role::Tool {
                        out.push_str("<tool_result>");
                        out.push_str(&m.content);
                        out.push_str("</tool_result>");
                    } else {
                        out.push_str(&m.content);
                    }
                }
                Role::Assistant => {
                    in_user = false;
                    out.push_str(&self.assistant);
                    let after_last_user = last_user.is_none_or(|u| i > u);
                    let keep = opts.thinking
                        && (opts.keep_all_reasoning
                            || !opts.tools.is_empty()
                            || after_last_user
                            || any_tool_message);
                    if keep {
                        out.push_str(self.think_start());
                        if let Some(r) = &m.reasoning {
                            out.push_str(r);
                        }
                    }
                    out.push_str(self.think_end(opts.thinking));
                    out.push_str(&m.content);
                    if !m.tool_calls.is_empty() {
                        out.push_str(&render_tool_calls(&m.tool_calls));
                    }
                    out.push_str(&self.end_of_turn);
                }
            }
        }
        if opts.add_generation_prompt {
            out.push_str(&self.assistant);
            if opts.thinking {
                out.push_str(self.think_start());
            } else {
                out.push_str(self.think_end(false));
            }
        }
        out
    }
}

/// V4 renders a run of tool results in the order of the preceding assistant message's tool
/// calls (matched by call id; an unknown id sorts first), as llama.cpp's
/// `deepseek_v4_sort_tool_results` does; user messages in the run keep their places.
fn sort_tool_results(messages: &[Message]) -> std::borrow::Cow<'_, [Message]> {
    use std::borrow::Cow;
    let mut out: Cow<'_, [Message]> = Cow::Borrowed(messages);
    let mut order: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            order = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
            i += 1;
            continue;
        }
        if !matches!(m.role, Role::User | Role::Tool) {
            i += 1;
            continue;
        }
        let mut end = i;
        let mut tools = Vec::new();
        while end < messages.len() && matches!(messages[end].role, Role::User | Role::Tool) {
            if messages[end].role == Role::Tool {
                tools.push(end);
            }
            end += 1;
        }
        if tools.len() > 1 && order.iter().any(|id| !id.is_empty()) {
            let rank = |m: &Message| {
                m.tool_call_id
                    .as_deref()
                    .and_then(|id| order.iter().position(|o| !o.is_empty() && *o == id))
                    .unwrap_or(0)
            };
            let mut results: Vec<Message> = tools.iter().map(|&p| messages[p].clone()).collect();
            results.sort_by_key(|m| rank(m)); // stable
            let v = out.to_mut();
            for (&p, r) in tools.iter().zip(results) {
                v[p] = r;
            }
        }
        i = end;
    }
    out
}

/// Render `messages` in the DeepSeek-V4 format with its special tokens, thinking off.
pub fn format_chat(messages: &[Message], add_generation_prompt: bool) -> String {
    ChatTemplate::deepseek_v4().render(
        messages,
        &ChatOptions {
            add_generation_prompt,
            ..ChatOptions::default()
        },
    )
}

/// Whether a Jinja chat template (e.g. GGUF `tokenizer.chat_template`) is a DeepSeek-V3/V4
/// style template (llama.cpp's detection: it mentions `<｜User｜>`, `<｜Assistant｜>` and
/// `<｜end▁of▁sentence｜>`).
pub fn looks_like_deepseek_v4(template: &str) -> bool {
    template.contains(USER_TOKEN)
        && template.contains(ASSISTANT_TOKEN)
        && template.contains(EOS_TOKEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: &str = BOS_TOKEN;
    const E: &str = EOS_TOKEN;

    #[test]
    fn single_turn_generation_prompt() {
        let s = format_chat(&[Message::user("Hi")], true);
        assert_eq!(s, format!("{B}<｜User｜>Hi<｜Assistant｜></think>"));
        let s = format_chat(&[Message::user("Hi")], false);
        assert_eq!(s, format!("{B}<｜User｜>Hi"));
    }

    #[test]
    fn system_and_multi_turn() {
        let msgs = [
            Message::system("Be brief."),
            Message::system("Be kind."),
            Message::user("Hi"),
            Message::assistant("Hello!"),
            Message::user("2+2?"),
        ];
        let s = format_chat(&msgs, true);
        assert_eq!(
            s,
            format!(
                "{B}Be brief.\n\nBe kind.<｜User｜>Hi<｜Assistant｜></think>Hello!{E}\
                 <｜User｜>2+2?<｜Assistant｜></think>"
            )
        );
    }

    #[test]
    fn consecutive_user_and_tool_messages_share_a_turn() {
        let msgs = [Message::user("a"), Message::user("b"), Message::tool("42")];
        let s = format_chat(&msgs, false);
        assert_eq!(
            s,
            format!("{B}<｜User｜>a\n\nb\n\n<tool_result>42</tool_result>")
        );
    }

    #[test]
    fn thinking_mode() {
        let mut a1 = Message::assistant("A1");
        a1.reasoning = Some("r1".into());
        let mut a2 = Message::assistant("A2");
        a2.reasoning = Some("r2".into());
        let msgs = [Message::user("q1"), a1, Message::user("q2"), a2];
        let t = ChatTemplate::deepseek_v4();
        let on = ChatOptions {
            add_generation_prompt: false,
            thinking: true,
            ..ChatOptions::default()
        };
        // Only the assistant message after the last user message keeps its reasoning.
        assert_eq!(
            t.render(&msgs, &on),
            format!(
                "{B}<｜User｜>q1<｜Assistant｜></think>A1{E}\
                 <｜User｜>q2<｜Assistant｜><think>r2</think>A2{E}"
            )
        );
        let gen = ChatOptions {
            add_generation_prompt: true,
            thinking: true,
            ..ChatOptions::default()
        };
        assert_eq!(
            t.render(&[Message::user("q")], &gen),
            format!("{B}<｜User｜>q<｜Assistant｜><think>")
        );
    }

    #[test]
    fn empty_conversation() {
        assert_eq!(format_chat(&[], false), B);
        assert_eq!(
            format_chat(&[], true),
            format!("{B}<｜Assistant｜></think>")
        );
    }

    #[test]
    fn detects_template() {
        assert!(looks_like_deepseek_v4(
            "{{ bos_token }}<｜User｜>{{ m }}<｜Assistant｜>{{ c }}<｜end▁of▁sentence｜>"
        ));
        assert!(!looks_like_deepseek_v4("<|im_start|>user"));
    }
}
