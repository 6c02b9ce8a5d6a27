// In-flight calls, kept apart from transport.js so main.js needn't load https/crypto at startup.
import { io } from '../cli-io.js'

/** The current run's in-flight calls: each entry cancels one. */
export const inflight = () => io().inflight

/** Abort every in-flight call of the current run: they fail with code Canceled, as a cancelled context does. */
export function cancelAll() {
  const calls = inflight()
  const n = calls.size
  for (const c of [...calls]) c()
  return n
}
