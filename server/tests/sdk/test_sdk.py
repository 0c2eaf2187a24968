#!/usr/bin/env python3
"""The official `openai` and `anthropic` Python SDKs against `fathom serve` on the built-in model.

    python3 server/tests/sdk/test_sdk.py [path/to/fathom]     # default: target/debug/fathom

Needs `pip install openai anthropic`. Starts the server on a free loopback port with an API
key, then drives: streaming and whole chat completions (their texts agree), a second turn
that reuses the first's cached prompt (usage counts it), logprobs, completions with token ids,
a prior tool-call round trip in the conversation (rendered and accepted), Anthropic messages
whole and streamed (same text), and the SDKs' own errors for a bad key and an unknown model.
Exits nonzero on the first failure.
"""
import re
import subprocess
import sys
import time

import anthropic
import openai

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/debug/fathom"
KEY = "test-key"
# (recent anthropic SDKs no longer take temperature as an argument)
GREEDY = {"temperature": 0}


def start():
    p = subprocess.Popen([BIN, "serve", "--port", "0", "--api-key", KEY, "--ctx", "1024"],
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stderr.readline()
        m = re.search(r"on http://([0-9.]+:[0-9]+)", line)
        if m:
            return p, m.group(1)
        if p.poll() is not None:
            break
    p.kill()
    sys.exit("the server did not start")


def main():
    proc, addr = start()
    try:
        run(addr)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print("sdk tests: ok")


def run(addr):
    oa = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=KEY)
    model = oa.models.list().data[0].id
    msgs = [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is free software?"}]

    whole = oa.chat.completions.create(model=model, messages=msgs, max_tokens=16,
                                       temperature=0, logprobs=True, top_logprobs=2)
    text = whole.choices[0].message.content
    assert whole.usage.completion_tokens == 16, whole.usage
    assert len(whole.choices[0].logprobs.content) == 16
    assert len(whole.choices[0].logprobs.content[0].top_logprobs) == 2

    chunks = oa.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0,
                                        stream=True, stream_options={"include_usage": True})
    streamed, usage = "", None
    for c in chunks:
        if c.choices and c.choices[0].delta.content:
            streamed += c.choices[0].delta.content
        if c.usage:
            usage = c.usage
    assert streamed == text, (streamed, text)
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens, usage

    turn2 = msgs + [{"role": "assistant", "content": text},
                    {"role": "user", "content": "Who wrote the GPL?"}]
    r2 = oa.chat.completions.create(model=model, messages=turn2, max_tokens=8, temperature=0)
    assert r2.usage.prompt_tokens_details.cached_tokens > 0, r2.usage

    # A conversation holding a tool call and its result, with tools offered.
    tools = [{"type": "function", "function": {"name": "get_time", "description": "The time.",
              "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}]
    convo = [{"role": "user", "content": "What time is it in Paris?"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"id": "call_1", "type": "function",
                              "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}}]},
             {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}]
    r3 = oa.chat.completions.create(model=model, messages=convo, tools=tools, max_tokens=8,
                                    temperature=0)
    assert r3.choices[0].finish_reason in ("stop", "length", "tool_calls"), r3

    comp = oa.completions.create(model=model, prompt=[0, 100, 200, 300], max_tokens=4,
                                 temperature=0)
    assert comp.usage.completion_tokens == 4

    try:
        openai.OpenAI(base_url=f"http://{addr}/v1", api_key="wrong").models.list()
        raise AssertionError("a wrong key was accepted")
    except openai.AuthenticationError:
        pass
    try:
        oa.chat.completions.create(model="gpt-nope", messages=msgs, max_tokens=2)
        raise AssertionError("an unknown model was accepted")
    except openai.NotFoundError:
        pass

    an = anthropic.Anthropic(base_url=f"http://{addr}", api_key=KEY)
    m = an.messages.create(model=model, max_tokens=12, system="Be brief.", extra_body=GREEDY,
                           messages=[{"role": "user", "content": "Hello"}])
    assert m.stop_reason == "max_tokens", m
    atext = "".join(b.text for b in m.content if b.type == "text")
    with an.messages.stream(model=model, max_tokens=12, system="Be brief.", extra_body=GREEDY,
                            messages=[{"role": "user", "content": "Hello"}]) as s:
        stext = "".join(s.text_stream)
        final = s.get_final_message()
    assert stext == atext, (stext, atext)
    assert final.usage.cache_read_input_tokens > 0, final.usage
    tool_turn = an.messages.create(
        model=model, max_tokens=6, extra_body=GREEDY,
        tools=[{"name": "get_time", "description": "The time.",
                "input_schema": {"type": "object", "properties": {}}}],
        messages=[{"role": "user", "content": "Time?"},
                  {"role": "assistant", "content": [
                      {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {}}]},
                  {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "noon"}]}])
    assert tool_turn.usage.output_tokens <= 6


if __name__ == "__main__":
    main()
