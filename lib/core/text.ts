// Text that came from outside (a node's answer, a tool's error, a report file) is printed with its
// control characters made visible: a terminal must never receive an escape sequence the tool did not
// write itself (a title or clipboard OSC, a cursor move that overwrites the summary, a line hidden by
// a carriage return).

/** ESC, CR, BEL, DEL, the C1 controls…: every control character but newline and tab. */
const CONTROLS = /\x1b\[[0-9;]*m|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g

function visible(c: string): string {
  const code = c.charCodeAt(0)
  return `\\x${code.toString(16).padStart(2, '0')}`
}

/**
 * `text` with every control character shown as `\xNN`. `keepColour`: colour sequences (SGR, `ESC [ … m`)
 * the tool wrote itself stay, for text whose outside parts were escaped before it was coloured.
 */
export function escapeControls(text: string, keepColour = false): string {
  return text.replace(CONTROLS, (m) => (m.length > 1 ? (keepColour ? m : `${visible(m)}${m.slice(1)}`) : visible(m)))
}

/** Every string in a parsed value (a report file) with its control characters made visible. */
export function escapeControlsDeep<T>(value: T): T {
  if (typeof value === 'string') return escapeControls(value) as T
  if (Array.isArray(value)) return value.map((v: unknown) => escapeControlsDeep(v)) as T
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [escapeControls(k), escapeControlsDeep(v)])) as T
  return value
}
