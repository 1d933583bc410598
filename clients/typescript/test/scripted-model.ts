/**
 * A scripted OpenAI-compatible chat server: a test double, labelled so.
 * It answers each request with the next scripted reply (as JSON, or as
 * server-sent events when the request streams) and records every request
 * body, so tests can assert exactly what the model was sent.
 */
import { type AddressInfo } from "node:net";
import { createServer, type Server } from "node:http";

export type Reply =
  | { text: string }
  | { toolCall: { name: string; arguments: unknown } };

export interface Scripted {
  url: string;
  requests: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

function completion(reply: Reply, n: number) {
  const message =
    "text" in reply
      ? { role: "assistant", content: reply.text }
      : {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: `call_${n}`,
              type: "function",
              function: {
                name: reply.toolCall.name,
                arguments: JSON.stringify(reply.toolCall.arguments),
              },
            },
          ],
        };
  return {
    id: `scripted-${n}`,
    object: "chat.completion",
    created: 0,
    model: "scripted",
    choices: [
      { index: 0, message, finish_reason: "text" in reply ? "stop" : "tool_calls" },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

function chunks(reply: Reply, n: number): unknown[] {
  const base = { id: `scripted-${n}`, object: "chat.completion.chunk", created: 0, model: "scripted" };
  if (!("text" in reply)) {
    throw new Error("the scripted server streams text replies only");
  }
  const words = reply.text.split(/(?<= )/);
  return [
    ...words.map((w, i) => ({
      ...base,
      choices: [
        { index: 0, delta: i === 0 ? { role: "assistant", content: w } : { content: w }, finish_reason: null },
      ],
    })),
    {
      ...base,
      choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    },
  ];
}

/** Starts the server on loopback with `script`, one reply per request. */
export async function scriptedModel(script: Reply[]): Promise<Scripted> {
  const requests: Array<Record<string, unknown>> = [];
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString("utf8")));
    req.on("end", () => {
      const parsed = JSON.parse(body) as Record<string, unknown>;
      requests.push(parsed);
      const n = requests.length;
      const reply = script[n - 1];
      if (reply === undefined) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `no scripted reply for request ${n}` } }));
        return;
      }
      if (parsed.stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (const c of chunks(reply, n)) {
          res.write(`data: ${JSON.stringify(c)}\n\n`);
        }
        res.end("data: [DONE]\n\n");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(completion(reply, n)));
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}
