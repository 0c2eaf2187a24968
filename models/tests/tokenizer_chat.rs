//! The chat format through a real tokenizer: markers become special-token ids, and a
//! vocabulary without the chat markers falls back to plain text.

use std::path::Path;

use fathom_models::chat::{ChatOptions, ChatTemplate, Message, ASSISTANT_TOKEN, USER_TOKEN};
use fathom_models::gguf::GgufFile;
use fathom_models::tokenizer::Tokenizer;

fn tiny() -> Tokenizer {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dsv4-tiny-Q2_0.gguf");
    Tokenizer::from_gguf(&GgufFile::open(p).unwrap()).unwrap()
}

#[test]
fn tiny_vocab_uses_plain_text_fallback() {
    let t = tiny();
    let tmpl = ChatTemplate::for_tokenizer(&t);
    assert!(tmpl.uses_fallback());
    assert_eq!(
        tmpl.missing_tokens(),
        [USER_TOKEN, ASSISTANT_TOKEN, "<think>", "</think>"]
    );
    let msgs = [
        Message::system("Be brief."),
        Message::user("Hi"),
        Message::assistant("Hello!"),
        Message::user("Bye"),
    ];
    let opts = ChatOptions::default();
    let s = tmpl.render(&msgs, &opts);
    assert_eq!(
        s,
        "<｜begin▁of▁sentence｜>Be brief.\n\nUser: Hi\n\nAssistant: Hello!\
         <｜end▁of▁sentence｜>User: Bye\n\nAssistant: "
    );
    // Encoded without a second BOS: exactly one BOS first, one EOS after the assistant turn.
    let ids = t.encode(&s, false).unwrap();
    assert_eq!(ids[0], 0);
    assert_eq!(ids.iter().filter(|&&x| x == 0).count(), 1);
    assert_eq!(ids.iter().filter(|&&x| x == 1).count(), 1);
    assert_eq!(t.decode(&ids), s);
}

#[test]
fn full_template_markers_are_single_tokens_when_present() {
    // The canonical template's markers are matched whole by a tokenizer that knows them:
    // add them as special tokens to the tiny tokenizer's inner `tokenizers` copy.
    let t = tiny();
    let mut inner = t.inner().clone();
    let added = inner.add_special_tokens(&[
        tokenizers::AddedToken::from(USER_TOKEN, true),
        tokenizers::AddedToken::from(ASSISTANT_TOKEN, true),
        tokenizers::AddedToken::from("</think>", true),
    ]);
    assert_eq!(added, 3);
    let s = fathom_models::chat::format_chat(&[Message::user("Hi")], true);
    let enc = inner.encode(s.as_str(), false).unwrap();
    let ids = enc.get_ids();
    assert_eq!(ids[0], 0);
    assert_eq!(ids[1], 512); // <｜User｜>
    assert_eq!(ids[ids.len() - 2], 513); // <｜Assistant｜>
    assert_eq!(ids[ids.len() - 1], 514); // </think>
}
