#!/usr/bin/env python3
"""The official `openai` and `anthropic` Python SDKs against `fathom serve` on the built-in model.

    python3 server/tests/sdk/test_sdk.py [path/to/fathom]     # default: target/debug/fathom

Needs `pip install openai anthropic`. Starts the server on a free loopback port with an API
key, then drives: streaming and whole chat completions (their texts agree), a second turn
that reuses the first's cached prompt (usage counts it), logprobs, completions with token ids,
a prior tool-call round trip in the conversation (rendered and accepted), Anthropic messages
whole and streamed (same text), and the SDKs' own errors for a bad key and an unknown model.
Then a second server with two slots and scripted replies (`--script`: the tiny model cannot
write DSML itself, so its replies are forced to DSML tool calls, every token still evaluated)
runs tool-call round trips through both SDKs, whole and streamed: the calls come back as
OpenAI `tool_calls` / Anthropic `tool_use` blocks, and the results go back for the answer.
Exits nonzero on the first failure.
"""
import json
import os
import tempfile
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


def start(*extra):
    p = subprocess.Popen([BIN, "serve", "--port", "0", "--api-key", KEY, "--ctx", "1024", *extra],
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
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "script.json")
        with open(script, "w") as f:
            json.dump(SCRIPT, f)
        proc, addr = start("--script", script, "--parallel", "2")
        try:
            run_tools(addr)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print("sdk tests: ok")


D = "\uff5cDSML\uff5c"
CALL = (f"Let me look.\n\n<{D}tool_calls>\n<{D}invoke name=\"get_weather\">\n"
        f"<{D}parameter name=\"city\" string=\"true\">Paris</{D}parameter>\n"
        f"<{D}parameter name=\"days\" string=\"false\">2</{D}parameter>\n"
        f"</{D}invoke>\n</{D}tool_calls>")
ANSWER = "It is 18 degrees and sunny in Paris."
# the replies of run_tools's requests, in order
SCRIPT = [CALL, CALL, ANSWER, CALL, CALL, ANSWER]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"},
                                            "days": {"type": "integer"}},
           "required": ["city"]}


def run_tools(addr):
    oa = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=KEY)
    model = oa.models.list().data[0].id
    tools = [{"type": "function", "function": {"name": "get_weather",
                                               "description": "Weather.", "parameters": WEATHER}}]
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    r = oa.chat.completions.create(model=model, messages=msgs, tools=tools, max_tokens=200)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert c.message.content.strip() == "Let me look.", c.message
    (call,) = c.message.tool_calls
    assert call.function.name == "get_weather", call
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 2}, call
    # streamed: the same call, in deltas
    name, args, finish = "", "", None
    for ch in oa.chat.completions.create(model=model, messages=msgs, tools=tools,
                                         max_tokens=200, stream=True):
        if not ch.choices:
            continue
        for tc in ch.choices[0].delta.tool_calls or []:
            name += tc.function.name or ""
            args += tc.function.arguments or ""
        finish = ch.choices[0].finish_reason or finish
    assert (name, json.loads(args), finish) == ("get_weather", {"city": "Paris", "days": 2},
                                                "tool_calls")
    # the result goes back; the answer continues the cached conversation
    back = msgs + [c.message.model_dump(exclude_none=True),
                   {"role": "tool", "tool_call_id": call.id, "content": "18 C, sunny"}]
    r = oa.chat.completions.create(model=model, messages=back, tools=tools, max_tokens=200)
    assert r.choices[0].message.content == ANSWER, r
    assert r.choices[0].finish_reason == "stop", r
    assert r.usage.prompt_tokens_details.cached_tokens > 0, r.usage

    an = anthropic.Anthropic(base_url=f"http://{addr}", api_key=KEY)
    atools = [{"name": "get_weather", "description": "Weather.", "input_schema": WEATHER}]
    amsgs = [{"role": "user", "content": "Weather in Paris?"}]
    m = an.messages.create(model=model, max_tokens=200, tools=atools, messages=amsgs)
    assert m.stop_reason == "tool_use", m
    (use,) = [b for b in m.content if b.type == "tool_use"]
    assert (use.name, use.input) == ("get_weather", {"city": "Paris", "days": 2}), use
    with an.messages.stream(model=model, max_tokens=200, tools=atools, messages=amsgs) as s:
        final = s.get_final_message()
    (suse,) = [b for b in final.content if b.type == "tool_use"]
    assert (final.stop_reason, suse.name, suse.input) == (
        "tool_use", "get_weather", {"city": "Paris", "days": 2}), final
    back = amsgs + [{"role": "assistant", "content": [b.model_dump() for b in m.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                  "content": "18 C, sunny"}]}]
    m = an.messages.create(model=model, max_tokens=200, tools=atools, messages=back)
    assert [b.text for b in m.content if b.type == "text"] == [ANSWER], m
    assert m.stop_reason == "end_turn", m


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
    # (the snapshot is taken before a prompt's last token, see server/src/worker.rs)
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1, usage

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
