/**
 * The memory-tool handlers inside `betaMemoryTool` of `@anthropic-ai/sdk`,
 * driven through the tool's own `run` with the SDK's command types, against
 * a real server; plus a hostile-path table.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { betaMemoryTool } from "@anthropic-ai/sdk/helpers/beta/memory";
import { ToolError } from "@anthropic-ai/sdk/lib/tools/ToolError";
import type { BetaMemoryTool20250818Command } from "@anthropic-ai/sdk/resources/beta";

import { memoryToolHandlers } from "../src/anthropic.js";
import { APP, client, freshUser } from "./support.js";

function tool(user: string) {
  return betaMemoryTool(memoryToolHandlers(client(), { app: APP, user }));
}

test("every command runs through the SDK's tool and keeps versions", async () => {
  const user = freshUser();
  const memory = tool(user);
  assert.equal(memory.type, "memory_20250818");
  const run = (c: BetaMemoryTool20250818Command) => memory.run(memory.parse(c));
  assert.equal(
    await run({ command: "create", path: "/memories/prefs.md", file_text: "likes tea\n" }),
    "File created successfully at: /memories/prefs.md",
  );
  const edited = await run({ command: "str_replace", path: "/memories/prefs.md", old_str: "tea", new_str: "coffee" });
  assert.ok(String(edited).includes("     1\tlikes coffee"), String(edited));
  assert.equal(
    await run({ command: "insert", path: "/memories/prefs.md", insert_line: 1, insert_text: "lives in Porto" }),
    "The file /memories/prefs.md has been edited.",
  );
  assert.equal(
    await run({ command: "view", path: "/memories/prefs.md", view_range: [2, -1] }),
    "Here's the content of /memories/prefs.md with line numbers:\n     2\tlives in Porto\n     3\t",
  );
  const versions = await client().api.GET("/v1/apps/{app}/users/{user}/artifact-versions/{name}", {
    params: { path: { app: APP, user, name: ".memories/prefs.md" } },
  });
  assert.deepEqual(
    versions.data?.items.map((m) => m.version),
    [1, 2, 3],
  );
  assert.equal(
    await run({ command: "rename", old_path: "/memories/prefs.md", new_path: "/memories/me/prefs.md" }),
    "Successfully renamed /memories/prefs.md to /memories/me/prefs.md",
  );
  const listing = String(await run({ command: "view", path: "/memories" }));
  assert.ok(listing.endsWith("\t/memories/me/prefs.md"), listing);
  assert.equal(await run({ command: "delete", path: "/memories/me" }), "Successfully deleted /memories/me");
  await assert.rejects(
    Promise.resolve().then(() => run({ command: "view", path: "/memories/me/prefs.md" })),
    (e: unknown) => {
      assert.ok(e instanceof ToolError);
      assert.equal(e.content, "The path /memories/me/prefs.md does not exist. Please provide a valid path.");
      return true;
    },
  );
});

test("hostile paths are refused without a host path", async () => {
  const memory = tool(freshUser());
  for (const path of [
    "/memories/../etc/passwd",
    "/memories_other/x.md",
    "/memories/%2e%2e/x.md",
    "/memories/a\\b.md",
    "/etc/passwd",
    "/memories//x.md",
  ]) {
    await assert.rejects(
      Promise.resolve().then(() => memory.run({ command: "create", path, file_text: "x" })),
      (e: unknown) => {
        assert.ok(e instanceof ToolError, `${path}: ${String(e)}`);
        assert.ok(!String(e.content).includes(".memories"), String(e.content));
        return true;
      },
      path,
    );
  }
  await assert.rejects(
    Promise.resolve().then(() => memory.run({ command: "delete", path: "/memories" })),
    ToolError,
  );
});
