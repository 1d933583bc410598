/**
 * Typed errors: every error reply of the server carries a `code` from one
 * closed list (`ErrorBody.code` in docs/openapi.json); each code maps to
 * one class, so callers catch a family (`Conflict`) or test the exact
 * `code`. The map is a `Record` over the generated union, so a code added
 * to the server fails `tsc` here until it is mapped.
 */
import type { components } from "./openapi.js";

/** Every code an error reply may carry. */
export type ErrorCode = components["schemas"]["ErrorBody"]["code"];

/** An error reply of the server, or a transport failure (`unavailable`). */
export class HippocampError extends Error {
  /** The server's code (`unavailable` for a transport failure). */
  readonly code: ErrorCode;
  /** The HTTP status (`undefined` when the server did not answer). */
  readonly status: number | undefined;

  constructor(message: string, code: ErrorCode, status?: number) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** The request is malformed or out of a documented bound; nothing was done. */
export class InvalidArgument extends HippocampError {}
/** One value is over a size limit named in the message (413). */
export class PayloadTooLarge extends InvalidArgument {}
/** No valid bearer token (401). */
export class Unauthorized extends HippocampError {}
/** The token, the policy or a missing consent does not allow it (403). */
export class Forbidden extends HippocampError {}
/** No such entry, artifact, version, run or job (404). */
export class NotFound extends HippocampError {}
/** An idempotency, epoch, hold or state conflict (409). */
export class Conflict extends HippocampError {}
/** A quota refused the write (429); it does not clear by waiting. */
export class QuotaExceeded extends HippocampError {}
/** The server or a backend asks to slow down (503): retry later. */
export class Overloaded extends HippocampError {}
/** The server or a backend cannot serve now (5xx). */
export class Unavailable extends HippocampError {}
/** The deadline passed before the operation completed (504). */
export class Timeout extends HippocampError {}
/** A backend returned something it must not, or data failed its check. */
export class Corrupt extends HippocampError {}
/** The operation is not supported by this server's stores (501). */
export class Unsupported extends HippocampError {}

type ErrorClass = new (message: string, code: ErrorCode, status?: number) => HippocampError;

const BY_CODE: Record<ErrorCode, ErrorClass> = {
  invalid_argument: InvalidArgument,
  confirmation_required: InvalidArgument,
  invalid_config: InvalidArgument,
  sensitive_content: InvalidArgument,
  unsupported_media_type: InvalidArgument,
  range_not_satisfiable: InvalidArgument,
  method_not_allowed: InvalidArgument,
  payload_too_large: PayloadTooLarge,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  policy_denied: Forbidden,
  consent_required: Forbidden,
  not_found: NotFound,
  idempotency_conflict: Conflict,
  source_gone: Conflict,
  consolidation_running: Conflict,
  run_conflict: Conflict,
  job_active: Conflict,
  retention: Conflict,
  legal_hold: Conflict,
  stale_epoch: Conflict,
  future_epoch: Conflict,
  lease_lost: Conflict,
  quota_exceeded: QuotaExceeded,
  overloaded: Overloaded,
  max_active_scopes_reached: Overloaded,
  unavailable: Unavailable,
  memory_disabled: Unavailable,
  outbox_unavailable: Unavailable,
  storage: Unavailable,
  timeout: Timeout,
  corrupt: Corrupt,
  invalid_reply: Corrupt,
  unsupported: Unsupported,
};

function isCode(c: unknown): c is ErrorCode {
  return typeof c === "string" && Object.hasOwn(BY_CODE, c);
}

/** The typed error of an error reply (`body` parsed when it is JSON). */
export function fromReply(status: number, body: unknown): HippocampError {
  const b = (typeof body === "object" && body !== null ? body : {}) as {
    code?: unknown;
    message?: unknown;
  };
  const message = typeof b.message === "string" ? b.message : `HTTP ${status}`;
  if (isCode(b.code)) {
    return new BY_CODE[b.code](message, b.code, status);
  }
  // A reply without a known code (a proxy's, say): by status.
  const code: ErrorCode =
    status === 401
      ? "unauthorized"
      : status === 403
        ? "forbidden"
        : status === 404
          ? "not_found"
          : status === 413
            ? "payload_too_large"
            : status >= 500
              ? "unavailable"
              : "invalid_argument";
  return new BY_CODE[code](message, code, status);
}
