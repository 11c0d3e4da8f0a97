// Routing by the URL's #fragment (`#/jobs/nightly?state=ACTIVE`): Envoy serves one page, at `/`.
import { useSyncExternalStore } from "react";

export type Route = { parts: string[]; query: URLSearchParams };

export function parseHash(hash: string): Route {
  const [path = "", search = ""] = hash.replace(/^#/, "").split("?", 2);
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(search) };
}

function subscribe(notify: () => void): () => void {
  window.addEventListener("hashchange", notify);
  return () => window.removeEventListener("hashchange", notify);
}

export function useRoute(): Route {
  const hash = useSyncExternalStore(subscribe, () => window.location.hash);
  return parseHash(hash);
}

/** `#/a/b?k=v` for the path's parts (each encoded) and the query's non-empty values. */
export function link(parts: readonly string[], query: Record<string, string> = {}): string {
  const search = new URLSearchParams(Object.entries(query).filter(([, value]) => value !== "")).toString();
  return `#/${parts.map(encodeURIComponent).join("/")}${search ? `?${search}` : ""}`;
}

/** The page of a resource name: `jobs/{job}` or `jobs/{job}/runs/{run}`. */
export function linkTo(name: string): string {
  return `#/${name}`;
}

export function navigate(target: string): void {
  window.location.hash = target.replace(/^#/, "");
}
