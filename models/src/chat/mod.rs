//! The DeepSeek-V4 chat format (`--chat`).
//!
//! Implemented from llama.cpp's `models/templates/deepseek-ai-DeepSeek-V4.jinja` (the
//! template the converter embeds for V4; spec `deepseek4.md` §11), without a Jinja engine:
//!
//! ```text
//! {BOS}{system prompt}                         all system messages, joined by "\n\n"
//! <｜User｜>{user}                              consecutive user/tool messages share one
//!                                              <｜User｜>, separated by "\n\n"
//! <｜User｜><tool_result>{tool}</tool_result>   a tool message (inside a user turn)
//! <｜Assistant｜></think>{content}<｜end▁of▁sentence｜>            thinking off (default)
//! <｜Assistant｜><think>{reasoning}</think>{content}<｜end▁of▁sentence｜>
//!                                              thinking on, only for assistant messages
//!                                              after the last user/tool message; earlier
//!                                              ones keep the plain `</think>` form
//! generation prompt: <｜Assistant｜></think> (thinking off) or <｜Assistant｜><think> (on)
//! ```
//!
//! The rendered string starts with the BOS text, so encode it with
//! [`Tokenizer::encode`]`(text, false)` (no second BOS); the markers are matched as special
//! tokens by the tokenizer. Some llama.cpp forks end a non-thinking generation prompt with
//! `<think></think>` instead of `</think>`; this module follows mainline and the spec.
//!
//! **Not implemented yet:** tool schemas in the system prompt (the template's `## Tools`
//! header + JSON schemas) and assistant tool calls (`<｜DSML｜tool_calls>` /
//! `<｜DSML｜invoke>` / `<｜DSML｜parameter>` blocks); `developer` messages (rendered like
//! user messages by the template) can be passed as [`Role::User`]. A GGUF
//! `tokenizer.chat_template` is not executed; [`looks_like_deepseek_v4`] only recognises it.
//!
//! **Fallback for vocabularies without the markers** ([`ChatTemplate::for_tokenizer`]):
//! the tiny test models only know BOS and EOS. A marker whose text is not a token of the
//! vocabulary is replaced by plain text: `<｜User｜>` → `"User: "`, `<｜Assistant｜>` →
//! `"\n\nAssistant: "`, the end-of-turn `<｜end▁of▁sentence｜>` → `"\n\n"`, and a missing BOS
//! is left out; a non-empty system prompt is then followed by `"\n\n"`. Missing `<think>` /
//! `</think>` are dropped in non-thinking mode and written as plain text in thinking mode.
//! [`ChatTemplate::missing_tokens`] lists what was replaced.
//!
//! [`Tokenizer::encode`]: crate::tokenizer::Tokenizer::encode

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

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The author.
    pub role: Role,
    /// The text.
    pub content: String,
    /// Reasoning of an assistant message (used only in thinking mode, for assistant
    /// messages after the last user message).
    pub reasoning: Option<String>,
}

impl Message {
    /// A message with `role` and `content`, no reasoning.
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            reasoning: None,
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChatOptions {
    /// End with the assistant header so that the model writes the next turn.
    pub add_generation_prompt: bool,
    /// Thinking mode (`<think>`); off by default, as in the template.
    pub thinking: bool,
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

    /// Render `messages` as one prompt string.
    pub fn render(&self, messages: &[Message], opts: ChatOptions) -> String {
        let mut out = String::new();
        out.push_str(&self.bos);
        let system: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        let system = system.join("\n\n");
        out.push_str(&system);
        if !system.is_empty() {
            out.push_str(&self.system_separator);
        }
        let last_user = messages
            .iter()
            .rposition(|m| matches!(m.role, Role::User | Role::Tool));
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
                    if after_last_user && opts.thinking {
                        out.push_str(self.think_start());
                        if let Some(r) = &m.reasoning {
                            out.push_str(r);
                        }
                    }
                    out.push_str(self.think_end(opts.thinking));
                    out.push_str(&m.content);
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

/// Render `messages` in the DeepSeek-V4 format with its special tokens, thinking off.
pub fn format_chat(messages: &[Message], add_generation_prompt: bool) -> String {
    ChatTemplate::deepseek_v4().render(
        messages,
        ChatOptions {
            add_generation_prompt,
            thinking: false,
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
        };
        // Only the assistant message after the last user message keeps its reasoning.
        assert_eq!(
            t.render(&msgs, on),
            format!(
                "{B}<｜User｜>q1<｜Assistant｜></think>A1{E}\
                 <｜User｜>q2<｜Assistant｜><think>r2</think>A2{E}"
            )
        );
        let gen = ChatOptions {
            add_generation_prompt: true,
            thinking: true,
        };
        assert_eq!(
            t.render(&[Message::user("q")], gen),
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
