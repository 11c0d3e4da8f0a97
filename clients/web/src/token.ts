// The API token (the security model's bearer token), kept in this browser only and sent on every call.
import type { Interceptor } from "@connectrpc/connect";

const KEY = "jobmesh.apiToken";

export function readToken(): string {
  try {
    return window.localStorage.getItem(KEY) ?? "";
  } catch {
    return "";
  }
}

export function saveToken(token: string): void {
  const trimmed = token.trim();
  if (trimmed) window.localStorage.setItem(KEY, trimmed);
  else window.localStorage.removeItem(KEY);
}

/** Adds `authorization: Bearer TOKEN` when a token is configured; Envoy passes the header on. */
export function tokenInterceptor(token: () => string): Interceptor {
  return (next) => async (request) => {
    const value = token().trim();
    if (value) request.header.set("authorization", `Bearer ${value}`);
    return next(request);
  };
}
