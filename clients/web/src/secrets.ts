// A command's `env` as the job page shows it: a value that is a secret reference (`secret://NAME`) is shown
// as the secret's name only; the executor resolves it, and no value ever reaches the dashboard.
export const SECRET_SCHEME = "secret://";

export type EnvEntry = { name: string; value: string; secret?: undefined } | { name: string; secret: string };

export function envEntries(env: Record<string, string>): EnvEntry[] {
  return Object.entries(env)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) =>
      value.startsWith(SECRET_SCHEME) ? { name, secret: value.slice(SECRET_SCHEME.length) || "?" } : { name, value },
    );
}
