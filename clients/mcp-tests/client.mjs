// Runs a plan of MCP steps with the official TypeScript SDK
// (@modelcontextprotocol/sdk 1.32.2) and prints one JSON result per step,
// for hippocamp's Rust integration tests.
//
// Usage: node client.mjs http URL TOKEN PLAN_JSON
//        node client.mjs stdio COMMAND_JSON PLAN_JSON
// A plan is a list of steps: ["tools"], ["call", NAME, ARGS], ["resources"],
// ["read", URI]. A step that throws records {"error": "..."}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [kind, ...rest] = process.argv.slice(2);
let transport;
let plan;
if (kind === 'http') {
  const [url, token, p] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  plan = JSON.parse(p);
} else {
  const [command, p] = rest;
  const [cmd, ...args] = JSON.parse(command);
  transport = new StdioClientTransport({ command: cmd, args, stderr: 'ignore' });
  plan = JSON.parse(p);
}

const client = new Client({ name: 'hippocamp-test', version: '1.0.0' });
await client.connect(transport);
const out = [];
for (const step of plan) {
  try {
    if (step[0] === 'tools') {
      const r = await client.listTools();
      out.push({ tools: r.tools });
    } else if (step[0] === 'call') {
      out.push(await client.callTool({ name: step[1], arguments: step[2] }));
    } else if (step[0] === 'resources') {
      const items = [];
      let cursor;
      do {
        const page = await client.listResources(cursor ? { cursor } : undefined);
        items.push(...page.resources);
        cursor = page.nextCursor;
      } while (cursor);
      out.push({ resources: items });
    } else if (step[0] === 'read') {
      out.push(await client.readResource({ uri: step[1] }));
    }
  } catch (e) {
    out.push({ error: `${e.name}: ${e.message}` });
  }
}
await client.close();
console.log(JSON.stringify(out));
