/** The typed client against a real `hippocamp serve`. */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Client,
  Conflict,
  Forbidden,
  HippocampError,
  InvalidArgument,
  NotFound,
  Unauthorized,
  Unavailable,
  httpBase,
} from "../src/index.js";
import { APP, client, drain, freshUser, streamOf } from "./support.js";

test("memory round trip: add, get, search, lineage, delete", async () => {
  const c = client();
  const user = freshUser();
  const added = await c.addEntry(APP, user, {
    content: "The user's sister lives in Lisbon",
    metadata: { kind: "family" },
    idempotency_key: "sister-city",
  });
  assert.equal(added.duplicate, false);
  const again = await c.addEntry(APP, user, {
    content: "The user's sister lives in Lisbon",
    metadata: { kind: "family" },
    idempotency_key: "sister-city",
  });
  assert.equal(again.duplicate, true);
  assert.equal(again.entry.id, added.entry.id);
  const got = await c.getEntry(APP, user, added.entry.id);
  assert.equal(got.content, "The user's sister lives in Lisbon");
  assert.equal(got.origin, "note");
  const found = await c.search(APP, user, "where does my sister live");
  assert.deepEqual(
    found.hits.map((h) => h.id),
    [added.entry.id],
  );
  const lineage = await c.lineage(APP, user, added.entry.id);
  assert.deepEqual(lineage.sources, []);
  // The same call through the typed route table.
  const { data } = await c.api.GET("/v1/apps/{app}/users/{user}/memory/entries/{id}", {
    params: { path: { app: APP, user, id: added.entry.id } },
  });
  assert.equal(data?.content, got.content);
  assert.equal((await c.deleteEntry(APP, user, added.entry.id)).deleted, 1);
  await assert.rejects(c.getEntry(APP, user, added.entry.id), NotFound);
});

test("errors are typed by code", async () => {
  const c = client();
  const user = freshUser();
  const e = await c.getEntry(APP, user, `mem-${"0".repeat(32)}`).catch((x: unknown) => x);
  assert.ok(e instanceof NotFound && e instanceof HippocampError);
  assert.equal(e.code, "not_found");
  assert.equal(e.status, 404);
  // An unknown field is refused, not dropped.
  const bad = await c
    .addEntry(APP, user, { content: "x", colour: "blue" } as never)
    .catch((x: unknown) => x);
  assert.ok(bad instanceof InvalidArgument, String(bad));
  assert.equal(bad.code, "invalid_argument");
  // Same key, other content.
  await c.addEntry(APP, user, { content: "one", idempotency_key: "k" });
  await assert.rejects(c.addEntry(APP, user, { content: "two", idempotency_key: "k" }), (x) => {
    assert.ok(x instanceof Conflict);
    assert.equal(x.code, "idempotency_conflict");
    return true;
  });
  // Scope is the token's: another app is forbidden whatever the path says.
  await assert.rejects(c.search("someone-elses-app", user, "anything"), Forbidden);
  // A token that is not one.
  await assert.rejects(client("not-a-token").search(APP, user, "x"), Unauthorized);
  // The same through the typed route table.
  await assert.rejects(
    c.api.POST("/v1/apps/{app}/users/{user}/memory/search", {
      params: { path: { app: "someone-elses-app", user } },
      body: { query: "x" },
    }),
    Forbidden,
  );
  // Nobody listening.
  const down = new Client({ baseUrl: "http://127.0.0.1:9", token: "t" });
  await assert.rejects(down.search(APP, user, "x"), (x) => {
    assert.ok(x instanceof Unavailable);
    assert.equal(x.code, "unavailable");
    assert.equal(x.status, undefined);
    return true;
  });
  assert.equal(httpBase("hippocamp://127.0.0.1:8765/"), "http://127.0.0.1:8765");
  assert.throws(() => httpBase("ftp://x"), TypeError);
});

test("events are ingested once, preloaded framed, and erased with their session", async () => {
  const c = client();
  const user = freshUser();
  const events = [
    {
      id: "e1",
      author: "user",
      timestamp_ms: 1_700_000_000_000,
      content: { role: "user", parts: [{ text: "I adopted a cat named Miso last week" }] },
    },
    {
      id: "e2",
      author: "agent",
      timestamp_ms: 1_700_000_001_000,
      content: { role: "model", parts: [{ text: "Congratulations on adopting Miso!" }] },
    },
  ];
  const first = await c.addEvents(APP, user, "s1", events);
  assert.equal(first.added.length, 2);
  const second = await c.addEvents(APP, user, "s1", events);
  assert.equal(second.added.length, 0);
  assert.equal(second.duplicates.length, 2);
  const p = await c.preload(APP, user, "What is my cat called?", { limit: 2 });
  assert.ok(p.block?.startsWith(`[hippocamp-memory nonce=${p.nonce}]`), String(p.block));
  assert.ok(p.block?.includes("Miso"));
  assert.equal((await c.preload(APP, user, "?!")).block, null);
  await assert.rejects(c.preload(APP, user, "cat", { limit: 0 }), InvalidArgument);
  const erased = await c.deleteSession(APP, user, "s1");
  assert.equal(erased.deleted, 2);
  assert.deepEqual((await c.search(APP, user, "cat Miso")).hits, []);
});

test("artifacts stream both ways and keep every version", async () => {
  const c = client();
  const scope = { app: APP, user: freshUser(), session: "s 1" };
  const name = "notes/a b?.txt";
  const chunk = new Uint8Array(64 * 1024).fill(97);
  const chunks = Array.from({ length: 16 }, () => chunk);
  const v1 = await c.putArtifact(scope, name, streamOf(chunks), {
    mimeType: "text/plain",
    metadata: { source: "test" },
  });
  assert.equal(v1.version, 1);
  assert.equal(v1.size, 16 * 64 * 1024);
  const v2 = await c.putArtifact(scope, name, "second", { mimeType: "text/plain" });
  assert.equal(v2.version, 2);
  const back = await drain(await c.streamArtifact(scope, name, 1));
  assert.equal(back.length, v1.size);
  assert.ok(back.every((b) => b === 97));
  assert.equal(new TextDecoder().decode(await c.getArtifact(scope, name)), "second");
  assert.equal((await c.artifactMeta(scope, name)).version, 2);
  const names = await c.listArtifacts(scope);
  assert.deepEqual(names.items, [name]);
  const removed = await c.deleteArtifact(scope, name);
  assert.deepEqual(removed.removed, [1, 2]);
  await assert.rejects(c.getArtifact(scope, name), NotFound);
  // Version numbers are never reused.
  assert.equal((await c.putArtifact(scope, name, "third")).version, 3);
});
