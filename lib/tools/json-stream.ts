/** Parses concatenated JSON documents (`talosctl get -o json` prints one object per resource, no array). */
export function parseJsonStream(text: string): unknown[] {
  const docs: unknown[] = []
  let depth = 0
  let start = -1
  let inString = false
  let escaped = false
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    if (inString) {
      if (escaped) escaped = false
      else if (ch === '\\') escaped = true
      else if (ch === '"') inString = false
      continue
    }
    if (ch === '"') inString = true
    else if (ch === '{' || ch === '[') {
      if (depth === 0) start = i
      depth++
    } else if (ch === '}' || ch === ']') {
      depth--
      if (depth === 0 && start >= 0) {
        docs.push(JSON.parse(text.slice(start, i + 1)))
        start = -1
      }
    }
  }
  return docs
}
