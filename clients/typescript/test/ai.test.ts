/**
 * The AI SDK pieces through `generateText` / `streamText` with
 * `@ai-sdk/openai-compatible`: exact assertions against the scripted model
 * server (a test double), and one end-to-end run with the real small model
 * CI serves (HIPPOCAMP_TEST_CHAT_URL).
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, streamText, wrapLanguageModel } from "ai";

import { memoryMiddleware, memoryTools } from "../src/ai.js";
import { Client, Unavailable } from "../src/index.js";
import { APP, client, env, freshUser } from "./support.js";
import { scriptedModel } from "./scripted-model.js";

type Msg = { role: string; content: unknown };

const text = (m: Msg): string => (typeof m.content === "string" ? m.content : JSON.stringify(m.content));
const isBlock = (m: Msg): boolean => m.role === "user" && text(m).startsWith("[hippocamp-memory nonce=");

function model(url: string, name = "scripted", fetch?: typeof globalThis.fetch) {
  return createOpenAICompatible({ name: "test", baseURL: url, ...(fetch ? { fetch } : {}) }).chatModel(name);
}

async function turns(c: Client, user: string): Promise<string[]> {
  const { data } = await c.api.GET("/v1/apps/{app}/users/{user}/memory/entries", {
    params: { path: { app: APP, user }, query: { limit: 100 } },
  });
  return (data?.entries ?? []).filter((e) => e.origin === "turn").map((e) => e.content).sort();
}

test("preload frames memory into the first call only; tools search; the turn is ingested once", async () => {
  const c = client();
  const user = freshUser();
  await c.addEntry(APP, user, "The user's cat is called Miso");
  const script = () => [
    { toolCall: { name: "searchMemory", arguments: { query: "cat name" } } },
    { text: "Your cat is called Miso." },
  ];
  const m = await scriptedModel([...script(), ...script()]);
  try {
    const run = () =>
      generateText({
        model: wrapLanguageModel({
          model: model(m.url),
          middleware: memoryMiddleware(c, { app: APP, user, session: "chat-1" }),
        }),
        tools: memoryTools(c, { app: APP, user }),
        system: "You are a helpful assistant.",
        messages: [{ role: "user", content: "What is my cat called?" }],
        stopWhen: stepCountIs(3),
      });
    const r = await run();
    assert.equal(r.text, "Your cat is called Miso.");
    assert.equal(m.requests.length, 2);
    const first = m.requests[0]?.messages as Msg[];
    // The block is a user message just before the user's own, never the system's.
    assert.deepEqual(
      first.map((x) => x.role),
      ["system", "user", "user"],
    );
    assert.ok(isBlock(first[1] as Msg), text(first[1] as Msg));
    assert.ok(text(first[1] as Msg).includes("Miso"));
    assert.ok(!text(first[0] as Msg).includes("hippocamp-memory"));
    assert.equal(text(first[2] as Msg), "What is my cat called?");
    const tools = (m.requests[0]?.tools as Array<{ function: { name: string; parameters: unknown } }>).map(
      (t) => t.function,
    );
    assert.deepEqual(tools.map((t) => t.name).sort(), ["addMemory", "loadArtifact", "searchMemory"]);
    const search = tools.find((t) => t.name === "searchMemory");
    assert.equal((search?.parameters as { additionalProperties: boolean }).additionalProperties, false);
    // The second call carries the tool's result and no second block.
    const second = m.requests[1]?.messages as Msg[];
    assert.equal(second.filter(isBlock).length, 0);
    const result = second.find((x) => x.role === "tool");
    assert.ok(result && text(result).includes("Miso") && text(result).includes("untrusted_reference_data"));
    // The turn: the user's message and the final answer, as turns.
    assert.deepEqual(await turns(c, user), ["What is my cat called?", "Your cat is called Miso."]);
    // The same call again ingests nothing new.
    await run();
    assert.deepEqual(await turns(c, user), ["What is my cat called?", "Your cat is called Miso."]);
  } finally {
    await m.close();
  }
});

test("addMemory writes to the fixed scope and streamed turns are ingested", async () => {
  const c = client();
  const user = freshUser();
  const m = await scriptedModel([
    { toolCall: { name: "addMemory", arguments: { content: "The user is allergic to peanuts" } } },
    { text: "Noted, no peanuts." },
    { text: "Good morning to you too." },
  ]);
  try {
    const wrapped = wrapLanguageModel({
      model: model(m.url),
      middleware: memoryMiddleware(c, { app: APP, user, session: "chat-2" }),
    });
    await generateText({
      model: wrapped,
      tools: memoryTools(c, { app: APP, user }),
      prompt: "Remember that I am allergic to peanuts",
      stopWhen: stepCountIs(3),
    });
    const hits = await c.search(APP, user, "peanuts allergic");
    assert.ok(hits.hits.some((h) => h.content === "The user is allergic to peanuts" && h.origin === "note"));
    // Streaming: the turn is ingested once the stream ends.
    const s = streamText({ model: wrapped, prompt: "Good morning" });
    assert.equal(await s.text, "Good morning to you too.");
    assert.ok((await turns(c, user)).includes("Good morning to you too."));
    assert.ok((await turns(c, user)).includes("Good morning"));
  } finally {
    await m.close();
  }
});

test("a failed preload runs without memory unless told to fail", async () => {
  const down = new Client({ baseUrl: "http://127.0.0.1:9", token: "t" });
  const m = await scriptedModel([{ text: "Hello." }]);
  try {
    const r = await generateText({
      model: wrapLanguageModel({
        model: model(m.url),
        middleware: memoryMiddleware(down, { app: APP, user: "u", session: "s", ingest: false }),
      }),
      prompt: "Hi",
    });
    assert.equal(r.text, "Hello.");
    assert.equal((m.requests[0]?.messages as Msg[]).filter(isBlock).length, 0);
    await assert.rejects(
      generateText({
        model: wrapLanguageModel({
          model: model(m.url),
          middleware: memoryMiddleware(down, {
            app: APP,
            user: "u",
            session: "s",
            ingest: false,
            onPreloadError: "fail",
          }),
        }),
        prompt: "Hi",
        maxRetries: 0,
      }),
      Unavailable,
    );
  } finally {
    await m.close();
  }
});

test("the real small model answers with memory preloaded and a forced memory search", async (t) => {
  const url = process.env.HIPPOCAMP_TEST_CHAT_URL;
  if (url === undefined) {
    // The driver passes it whenever the model runs (always in CI) and
    // then counts skips as failures.
    t.skip("HIPPOCAMP_TEST_CHAT_URL is not set (scripts/chat-model.sh start)");
    return;
  }
  const name = env("HIPPOCAMP_TEST_CHAT_MODEL");
  const c = client();
  const user = freshUser();
  await c.addEntry(APP, user, "The user lives in Lisbon");
  const sent: string[] = [];
  const recording: typeof globalThis.fetch = async (input, init) => {
    if (typeof init?.body === "string") {
      sent.push(init.body);
    }
    return globalThis.fetch(input, init);
  };
  const r = await generateText({
    model: wrapLanguageModel({
      model: model(url, name, recording),
      middleware: memoryMiddleware(c, { app: APP, user, session: "real-1" }),
    }),
    tools: memoryTools(c, { app: APP, user }),
    prompt: "Where do I live?",
    prepareStep: ({ stepNumber }) =>
      // llama.cpp takes `required`, not a named tool: only the search is active.
      stepNumber === 0 ? { toolChoice: "required", activeTools: ["searchMemory"] } : { toolChoice: "none" },
    stopWhen: stepCountIs(2),
    maxOutputTokens: 96,
    temperature: 0,
  });
  // The first request carried the framed block with the stored fact.
  assert.ok(sent.length >= 1);
  const first = JSON.parse(sent[0] as string) as { messages: Msg[] };
  const block = first.messages.find(isBlock);
  assert.ok(block && text(block).includes("Lisbon"), sent[0]);
  // The forced first step called the memory search (its input may or may
  // not validate: a small model's arguments are its own).
  const calls = r.steps[0]?.toolCalls ?? [];
  assert.equal(calls[0]?.toolName, "searchMemory");
  assert.equal(r.steps.length, 2);
  // The turn was remembered.
  assert.ok((await turns(c, user)).includes("Where do I live?"));
  console.log(JSON.stringify({ real_model: name, steps: r.steps.length, usage: r.totalUsage, answer: r.text }));
});
