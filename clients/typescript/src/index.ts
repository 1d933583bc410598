/** hippocamp's API v1 client: see `client.ts`; AI SDK pieces are in `hippocamp/ai`. */
export * from "./client.js";
export * from "./errors.js";
export type { components, paths } from "./openapi.js";
