// In-flight calls, kept apart from transport.js so main.js needn't load https/crypto at startup.
import { io } from '../cli-io.js'

/** The current run's in-flight calls: each entry cancels one (cli-io.js cancelCalls). */
export const inflight = () => io().inflight
