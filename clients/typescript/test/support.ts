/**
 * The live server the tests run against, from the environment the Rust
 * driver (`tests/typescript.rs`) sets: HIPPOCAMP_URL and HIPPOCAMP_TOKEN
 * (app `ts`, every user, every permission).
 */
import { randomUUID } from "node:crypto";

import { Client } from "../src/index.js";

export const APP = "ts";

/** The variable, or a failure naming it (tests never skip silently). */
export function env(name: string): string {
  const v = process.env[name];
  if (v === undefined || v === "") {
    throw new Error(`${name} is not set: run these tests through \`cargo test --test typescript\``);
  }
  return v;
}

export function client(token = env("HIPPOCAMP_TOKEN")): Client {
  return new Client({ baseUrl: env("HIPPOCAMP_URL"), token });
}

/** A fresh user per test: tests never see each other's data. */
export function freshUser(): string {
  return `u-${randomUUID().slice(0, 12)}`;
}

/** A stream of `chunks`, one at a time. */
export function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const c = chunks[i++];
      if (c === undefined) {
        controller.close();
      } else {
        controller.enqueue(c);
      }
    },
  });
}

/** Every byte of a stream. */
export async function drain(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  const reader = s.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) {
      break;
    }
    parts.push(value);
  }
  return new Uint8Array(Buffer.concat(parts));
}
