/**
 * LoCoMo replayed through this client (each session's events through
 * `/events`, each question through `search` with limit 10) gives the R@10
 * of `hippocamp eval locomo` on the same data. The Rust driver exports
 * the data and runs the eval first (HIPPOCAMP_LOCOMO_EXPORT / _EVAL).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import type { Event } from "../src/index.js";
import { client, env } from "./support.js";

interface Export {
  samples: Array<{
    app: string;
    user: string;
    sessions: Array<{ id: string; events: Event[] }>;
    questions: Array<{ text: string; category: number; evidence: string[] }>;
  }>;
}

test("LoCoMo through the TypeScript client matches the eval's R@10", async (t) => {
  if (process.env.HIPPOCAMP_LOCOMO_EXPORT === undefined) {
    t.skip("HIPPOCAMP_LOCOMO_EXPORT is not set (the shared data folder is missing)");
    return;
  }
  const data = JSON.parse(readFileSync(env("HIPPOCAMP_LOCOMO_EXPORT"), "utf8")) as Export;
  const evaluated = JSON.parse(readFileSync(env("HIPPOCAMP_LOCOMO_EVAL"), "utf8")) as {
    recall_at_10: number;
    mode: string;
  };
  const evalR10 = evaluated.recall_at_10;
  const c = client(env("HIPPOCAMP_LOCOMO_TOKEN"));
  for (const s of data.samples) {
    for (const session of s.sessions) {
      const r = await c.addEvents(s.app, s.user, session.id, session.events);
      assert.deepEqual(r.skipped, [], `${s.user}/${session.id}`);
    }
  }
  const recalls: number[] = [];
  for (const s of data.samples) {
    for (const q of s.questions) {
      if (q.category < 1 || q.category > 4) {
        continue;
      }
      const r = await c.search(s.app, s.user, { query: q.text, limit: 10 });
      const ranked = r.hits.map((h) => (h.metadata as { dia_id?: string }).dia_id);
      const found = q.evidence.filter((e) => ranked.includes(e)).length;
      recalls.push(found / q.evidence.length);
    }
  }
  const r10 = recalls.reduce((a, b) => a + b, 0) / recalls.length;
  // The settings both sides ran with: the server's default search mode,
  // every sample in one server (no isolation), no reference time.
  console.log(
    JSON.stringify({
      questions: recalls.length,
      mode: evaluated.mode,
      limit: 10,
      ts_recall_at_10: r10,
      eval_recall_at_10: evalR10,
    }),
  );
  assert.ok(recalls.length > 100);
  assert.ok(Math.abs(r10 - evalR10) < 1e-9, `${r10} vs ${evalR10}`);
});
