/**
 * The typed client of hippocamp's API v1.
 *
 * - `client.api` is every route, typed from docs/openapi.json (generated
 *   into `openapi.ts` by openapi-typescript; a test regenerates it and
 *   fails when it is stale), through openapi-fetch.
 * - The methods below are the common calls, with plain arguments.
 * - Every error reply is thrown as the typed error of its code
 *   (`errors.ts`); a server that does not answer is `Unavailable`.
 * - Artifact bodies stream both ways (`putArtifact` takes a
 *   `ReadableStream`, `streamArtifact` returns one); the server checks
 *   SHA-256 on every read.
 *
 * Scope is authority: the server takes it from the token, and a path
 * naming another app or user is refused (`Forbidden`), whatever a caller
 * or a model passes here.
 */
import createClient, { type Client as FetchClient, type Middleware } from "openapi-fetch";

import { HippocampError, Unavailable, fromReply } from "./errors.js";
import type { components, paths } from "./openapi.js";

/** The API's schemas, by name. */
export type Schemas = components["schemas"];
export type MemoryEntry = Schemas["MemoryEntry"];
export type NewEntry = Schemas["NewEntry"];
export type SearchRequest = Schemas["SearchRequest"];
export type SearchResults = Schemas["SearchResults"];
export type SearchHit = Schemas["SearchHit"];
export type Event = Schemas["Event"];
export type IngestReport = Schemas["IngestReport"];
export type ArtifactMeta = Schemas["ArtifactMeta"];
export type PreloadRequest = Schemas["PreloadRequest"];
export type Preload = Schemas["PreloadReply"];
export type AddOutcome = Schemas["AddOutcome"];

/** Where an artifact lives: an app, a user of it, or a session of a user. */
export interface ArtifactScope {
  app: string;
  user?: string;
  session?: string;
}

export interface ClientOptions {
  /** `http://HOST:PORT` (or `hippocamp://HOST:PORT`, the same). */
  baseUrl: string;
  /** A bearer token (`hippocamp token create`). */
  token: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof globalThis.fetch;
}

/** `http://HOST:PORT` of a `hippocamp://HOST:PORT` or http(s) URL. */
export function httpBase(url: string): string {
  const u = url.replace(/\/+$/, "");
  if (u.startsWith("hippocamp://")) {
    return `http://${u.slice("hippocamp://".length)}`;
  }
  if (u.startsWith("http://") || u.startsWith("https://")) {
    return u;
  }
  throw new TypeError(`not a hippocamp URL: ${url} (expected http://HOST:PORT)`);
}

/** One path segment, percent-encoded (so `/`, `?` and `%` stay inside it). */
const seg = (s: string): string => encodeURIComponent(s);

/** An artifact name's segments, each encoded: a name may hold `/`. */
const nameSegs = (name: string): string => name.split("/").map(seg).join("/");

/** The path of a memory scope. */
function userPath(app: string, user: string): string {
  return `/v1/apps/${seg(app)}/users/${seg(user)}`;
}

/** The path of an artifact scope. */
function artifactScopePath(s: ArtifactScope): string {
  let p = `/v1/apps/${seg(s.app)}`;
  if (s.user !== undefined) {
    p += `/users/${seg(s.user)}`;
    if (s.session !== undefined) {
      p += `/sessions/${seg(s.session)}`;
    }
  } else if (s.session !== undefined) {
    throw new TypeError("a session scope needs its user");
  }
  return p;
}

/** Fills `{name}` path parameters segment by segment (artifact names hold `/`). */
function pathSerializer(path: string, params: Record<string, unknown>): string {
  return path.replace(/\{([^}]+)\}/g, (_, key: string) => {
    const v = params[key];
    if (v === undefined || v === null) {
      throw new TypeError(`missing path parameter ${key}`);
    }
    return key === "name" ? nameSegs(String(v)) : seg(String(v));
  });
}

/** Throws the typed error of an error reply. */
const typedErrors: Middleware = {
  async onResponse({ response }) {
    if (!response.ok) {
      throw fromReply(response.status, await response.json().catch(() => undefined));
    }
    return undefined;
  },
  onError({ error }) {
    if (error instanceof HippocampError) {
      return error;
    }
    return new Unavailable(`the server did not answer: ${String(error)}`, "unavailable");
  },
};

export class Client {
  /** Every route of API v1, typed; errors are thrown typed. */
  readonly api: FetchClient<paths>;
  readonly #base: string;
  readonly #token: string;
  readonly #fetch: typeof globalThis.fetch;

  constructor(opts: ClientOptions) {
    this.#base = httpBase(opts.baseUrl);
    this.#token = opts.token;
    this.#fetch = opts.fetch ?? globalThis.fetch;
    this.api = createClient<paths>({
      baseUrl: this.#base,
      fetch: this.#fetch,
      headers: { authorization: `Bearer ${opts.token}` },
      pathSerializer,
    });
    this.api.use(typedErrors);
  }

  /** A request outside openapi-fetch (bodies as streams): typed errors. */
  async #send(method: string, path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${this.#token}`);
    let r: Response;
    try {
      r = await this.#fetch(`${this.#base}${path}`, { ...init, method, headers });
    } catch (e) {
      throw new Unavailable(`the server did not answer: ${String(e)}`, "unavailable");
    }
    if (!r.ok) {
      throw fromReply(r.status, await r.json().catch(() => undefined));
    }
    return r;
  }

  async #json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit =
      body === undefined
        ? {}
        : { body: JSON.stringify(body), headers: { "content-type": "application/json" } };
    return (await (await this.#send(method, path, init)).json()) as T;
  }

  // ---- memory ----------------------------------------------------------

  /** Adds an entry (a string is its content); idempotent with `idempotency_key`. */
  addEntry(app: string, user: string, entry: NewEntry | string): Promise<AddOutcome> {
    const body = typeof entry === "string" ? { content: entry } : entry;
    return this.#json("POST", `${userPath(app, user)}/memory/entries`, body);
  }

  getEntry(app: string, user: string, id: string): Promise<MemoryEntry> {
    return this.#json("GET", `${userPath(app, user)}/memory/entries/${seg(id)}`);
  }

  /** Erases an entry and every fact derived from it. */
  deleteEntry(app: string, user: string, id: string): Promise<Schemas["Deleted"]> {
    return this.#json("DELETE", `${userPath(app, user)}/memory/entries/${seg(id)}`);
  }

  /** Searches the user's memory (a string is the query). */
  search(app: string, user: string, req: SearchRequest | string): Promise<SearchResults> {
    const body = typeof req === "string" ? { query: req } : req;
    return this.#json("POST", `${userPath(app, user)}/memory/search`, body);
  }

  /**
   * The framed memory block the agent runner preloads for `query`: put
   * `block` in a user message (never the system instruction); it is
   * `null` when nothing was found.
   */
  preload(
    app: string,
    user: string,
    query: string,
    opts: Omit<PreloadRequest, "query"> = {},
  ): Promise<Preload> {
    return this.#json("POST", `${userPath(app, user)}/memory/preload`, { ...opts, query });
  }

  /** Ingests conversation events of a session now (each remembered once). */
  addEvents(app: string, user: string, session: string, events: Event[]): Promise<IngestReport> {
    return this.#json(
      "POST",
      `${userPath(app, user)}/memory/sessions/${seg(session)}/events`,
      { events },
    );
  }

  /** An entry's sources and what was derived from it. */
  lineage(app: string, user: string, id: string): Promise<Schemas["Lineage"]> {
    return this.#json("GET", `${userPath(app, user)}/memory/entries/${seg(id)}/lineage`);
  }

  /** Erases a session's memory (its entries and what was derived from them). */
  deleteSession(app: string, user: string, session: string): Promise<Schemas["SessionErased"]> {
    const confirm = encodeURIComponent(`${app}/${user}/${session}`);
    return this.#json(
      "DELETE",
      `${userPath(app, user)}/memory/sessions/${seg(session)}?confirm=${confirm}`,
    );
  }

  /** Erases everything the user's memory holds. */
  deleteUser(app: string, user: string): Promise<Schemas["UserErased"]> {
    const confirm = encodeURIComponent(`${app}/${user}`);
    return this.#json("DELETE", `${userPath(app, user)}/memory?confirm=${confirm}`);
  }

  /** Limits and features of the memory store and the server. */
  memoryCapabilities(): Promise<Schemas["CapabilitiesWithHttp"]> {
    return this.#json("GET", "/v1/memory/capabilities");
  }

  /**
   * Runs one command of Anthropic's memory tool on the user's `/memories`
   * files (`POST …/memory-tool`); the text the model reads. A refused
   * command throws `InvalidArgument` whose message, after `invalid path: `,
   * is that text.
   */
  async memoryTool(app: string, user: string, command: object): Promise<string> {
    const r = await this.#json<{ result: string }>("POST", `${userPath(app, user)}/memory-tool`, command);
    return r.result;
  }

  // ---- artifacts -------------------------------------------------------

  /**
   * Stores `body` as the next version of `name`. A `ReadableStream` is
   * streamed; the reply is the new version's record.
   */
  async putArtifact(
    scope: ArtifactScope,
    name: string,
    body: Uint8Array | string | Blob | ReadableStream<Uint8Array>,
    opts: { mimeType?: string; metadata?: Record<string, unknown> } = {},
  ): Promise<ArtifactMeta> {
    const headers: Record<string, string> = {
      "content-type": opts.mimeType ?? "application/octet-stream",
    };
    if (opts.metadata !== undefined) {
      headers["x-hippocamp-metadata"] = JSON.stringify(opts.metadata);
    }
    const init: RequestInit & { duplex?: "half" } = { body: body as BodyInit, headers };
    if (body instanceof ReadableStream) {
      init.duplex = "half";
    }
    const path = `${artifactScopePath(scope)}/artifacts/${nameSegs(name)}`;
    return (await (await this.#send("PUT", path, init)).json()) as ArtifactMeta;
  }

  /** A version's bytes as they arrive (the latest when `version` is absent). */
  async streamArtifact(
    scope: ArtifactScope,
    name: string,
    version?: number,
  ): Promise<ReadableStream<Uint8Array>> {
    const q = version === undefined ? "" : `?version=${version}`;
    const r = await this.#send("GET", `${artifactScopePath(scope)}/artifacts/${nameSegs(name)}${q}`);
    if (r.body === null) {
      throw new Unavailable("the server sent no body", "unavailable", r.status);
    }
    return r.body;
  }

  /** A version's bytes, whole. */
  async getArtifact(scope: ArtifactScope, name: string, version?: number): Promise<Uint8Array> {
    const q = version === undefined ? "" : `?version=${version}`;
    const r = await this.#send("GET", `${artifactScopePath(scope)}/artifacts/${nameSegs(name)}${q}`);
    return new Uint8Array(await r.arrayBuffer());
  }

  /** A version's record, without its bytes. */
  artifactMeta(scope: ArtifactScope, name: string, version?: number): Promise<ArtifactMeta> {
    const q = version === undefined ? "" : `?version=${version}`;
    return this.#json("GET", `${artifactScopePath(scope)}/artifact-meta/${nameSegs(name)}${q}`);
  }

  /** A page of names with a live version. */
  listArtifacts(
    scope: ArtifactScope,
    page: { cursor?: string; limit?: number } = {},
  ): Promise<Schemas["ArtifactNamePage"]> {
    const q = new URLSearchParams();
    if (page.cursor !== undefined) q.set("cursor", page.cursor);
    if (page.limit !== undefined) q.set("limit", String(page.limit));
    const qs = q.size > 0 ? `?${q}` : "";
    return this.#json("GET", `${artifactScopePath(scope)}/artifacts${qs}`);
  }

  /** Deletes every version of `name` (or one, with `version`). */
  deleteArtifact(scope: ArtifactScope, name: string, version?: number): Promise<Schemas["Removed"]> {
    const q = version === undefined ? "?all=true" : `?version=${version}`;
    return this.#json("DELETE", `${artifactScopePath(scope)}/artifacts/${nameSegs(name)}${q}`);
  }
}
