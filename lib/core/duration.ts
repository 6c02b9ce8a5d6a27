const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** Parses `500ms`, `3s`, `1m30s`, `5m`, `1h`; returns milliseconds, or undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim()
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(trimmed)) return undefined
  let total = 0
  for (const [, value, , unit] of trimmed.matchAll(/(\d+(\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(value) * (UNITS[unit ?? 's'] ?? 0)
  }
  return Math.round(total)
}

/** 1234 -> "1.2s", 65000 -> "1m5s", 350 -> "350ms". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`
  const minutes = Math.floor(ms / 60_000)
  const seconds = Math.round((ms % 60_000) / 1000)
  return seconds ? `${minutes}m${seconds}s` : `${minutes}m`
}

/** Go-style duration for tool flags (`--timeout 5m0s` accepts `300s`). */
export function goDuration(ms: number): string {
  return `${Math.max(1, Math.ceil(ms / 1000))}s`
}
