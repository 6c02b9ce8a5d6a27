// In-flight calls, kept apart from transport.js so main.js needn't load https/crypto at startup.
export const inflight = new Set()

/** Abort every in-flight call (signal handling): they fail with code Canceled, as a cancelled context does. */
export function cancelAll() {
  const n = inflight.size
  for (const c of [...inflight]) c()
  return n
}
