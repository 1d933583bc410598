/**
 * Handlers for `betaMemoryTool` of `@anthropic-ai/sdk` 1.17.x
 * (`helpers/beta/memory`): every command of the memory tool runs on the
 * server (`POST …/memory-tool`), on the user's versioned `/memories` files;
 * a refused command throws the SDK's `ToolError` with the text the model
 * should read.
 *
 *     import { betaMemoryTool } from "@anthropic-ai/sdk/helpers/beta/memory";
 *     const memory = betaMemoryTool(memoryToolHandlers(client, { app, user }));
 *
 * The scope is fixed when the handlers are built; the token decides what
 * they may touch.
 */
import type { MemoryToolHandlers } from "@anthropic-ai/sdk/helpers/beta/memory";
import { ToolError } from "@anthropic-ai/sdk/lib/tools/ToolError";

import type { Client } from "./client.js";
import { InvalidArgument } from "./errors.js";

/** The server words a refused path as `invalid path: <text for the model>`. */
const PREFIX = "invalid path: ";

/** The six handlers, on `client` for `scope`. */
export function memoryToolHandlers(client: Client, scope: { app: string; user: string }): MemoryToolHandlers {
  const run = async (command: object): Promise<string> => {
    try {
      return await client.memoryTool(scope.app, scope.user, command);
    } catch (e) {
      if (e instanceof InvalidArgument) {
        throw new ToolError(e.message.startsWith(PREFIX) ? e.message.slice(PREFIX.length) : e.message);
      }
      throw e;
    }
  };
  return { view: run, create: run, str_replace: run, insert: run, delete: run, rename: run };
}
