//! The chat renderer against transcripts rendered by llama.cpp's DeepSeek-V4 Jinja template
//! (`fixtures/chat/render.py`: system, developer, multi-turn, thinking and its reasoning
//! rules, `reasoning_effort: max`, tool schemas, DSML tool calls with string and JSON
//! arguments, tool results reordered by call id, response formats), and DSML replies parsed
//! back from the rendered calls.

use fathom_models::chat::dsml::parse_reply;
use fathom_models::chat::{ChatOptions, ChatTemplate, Message, Role, ToolCall};
use serde_json::Value;

fn transcripts() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/chat/transcripts.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn message(m: &Value) -> Message {
    let role = match m["role"].as_str().unwrap() {
        "system" => Role::System,
        "user" | "developer" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        r => panic!("role {r}"),
    };
    let mut msg = Message::new(role, m["content"].as_str().unwrap_or(""));
    msg.reasoning = m["reasoning_content"].as_str().map(str::to_owned);
    msg.tool_call_id = m["tool_call_id"].as_str().map(str::to_owned);
    if let Some(calls) = m["tool_calls"].as_array() {
        for c in calls {
            let f = &c["function"];
            let args = match &f["arguments"] {
                Value::String(s) => serde_json::from_str::<Value>(s).unwrap(),
                v => v.clone(),
            };
            msg.tool_calls.push(ToolCall {
                id: c["id"].as_str().unwrap_or("").to_owned(),
                name: f["name"].as_str().unwrap().to_owned(),
                arguments: args.as_object().unwrap().clone(),
            });
        }
    }
    msg
}

fn options(o: &Value) -> ChatOptions {
    ChatOptions {
        add_generation_prompt: o["add_generation_prompt"].as_bool().unwrap(),
        thinking: o["thinking"].as_bool().unwrap_or(false),
        keep_all_reasoning: o["drop_thinking"].as_bool() == Some(false),
        tools: o["tools"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .filter(|t| t["type"] == "function")
                    .map(|t| t["function"].clone())
                    .collect()
            })
            .unwrap_or_default(),
        response_format: o.get("response_format").cloned(),
        reasoning_effort_max: o["reasoning_effort"] == "max",
    }
}

#[test]
fn renders_exactly_as_the_jinja_template() {
    let t = ChatTemplate::deepseek_v4();
    let cases = transcripts();
    assert!(cases.len() >= 10);
    for c in &cases {
        let msgs: Vec<Message> = c["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(message)
            .collect();
        let got = t.render(&msgs, &options(&c["options"]));
        assert_eq!(got, c["expected"].as_str().unwrap(), "case: {}", c["name"]);
    }
}

#[test]
fn rendered_tool_calls_parse_back() {
    for c in &transcripts() {
        for m in c["messages"].as_array().unwrap() {
            let msg = message(m);
            if msg.tool_calls.is_empty() {
                continue;
            }
            let text = format!(
                "{}{}",
                msg.content,
                fathom_models::chat::render_tool_calls(&msg.tool_calls)
            );
            let r = parse_reply(&text, false);
            assert_eq!(r.content, msg.content);
            let want: Vec<ToolCall> = msg
                .tool_calls
                .iter()
                .map(|c| ToolCall {
                    id: String::new(),
                    ..c.clone()
                })
                .collect();
            assert_eq!(r.tool_calls, want, "case: {}", c["name"]);
        }
    }
}
