// The jobs list's filter controls as one AIP-160 filter of the API (see SearchService in the contract).

export type JobFilters = {
  state: string; // ACTIVE, PAUSED, COMPLETED, or "" for any
  kind: string; // IMMEDIATE, RUN_AT, CRON, or ""
  label: string; // key=value, or key alone (has the label)
  text: string; // matched anywhere in the name, or the display name
  textIn: "name" | "display_name";
};

export const NO_FILTERS: JobFilters = { state: "", kind: "", label: "", text: "", textIn: "name" };

export function quoted(value: string): string {
  return `"${value.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

export function jobFilter(filters: JobFilters): string {
  const parts: string[] = [];
  if (filters.state) parts.push(`state = ${filters.state}`);
  if (filters.kind) parts.push(`schedule = ${filters.kind}`);
  const label = filters.label.trim();
  if (label) {
    const [key = "", ...rest] = label.split("=");
    parts.push(rest.length ? `labels.${key.trim()} = ${quoted(rest.join("=").trim())}` : `labels:${key.trim()}`);
  }
  const text = filters.text.trim().replaceAll("*", "");
  if (text) {
    const pattern = filters.textIn === "name" ? `jobs/*${text.toLowerCase()}*` : `*${text}*`;
    parts.push(`${filters.textIn} = ${quoted(pattern)}`);
  }
  return parts.join(" AND ");
}
