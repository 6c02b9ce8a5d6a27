// A unified line diff in the shape Talos prints it (pkg/machinery/textdiff Diff: Myers through
// neticdk/go-stdlib diff/myers with its unified formatter): `--- a` / `+++ b`, hunks of 3 context
// lines whose header always carries both counts (`@@ -3,1 +3,2 @@`), changes closer than 2 × 3 lines
// in one hunk, no "no newline" marker (a trailing newline ends the last line; go-stdlib
// diffcore.SplitLines), and past MaxLines (75 000 lines together) only `@@ -1,N +1,M @@ diff too
// large to display`. The edit script is Myers' greedy shortest one (deletions before insertions in a
// changed run); Talos runs Hirschberg's linear-space variant, which may place an ambiguous change
// elsewhere. The product never imports this file.

export const MAX_LINES = 75_000
const CONTEXT = 3

/** lines of a text: a trailing newline ends the last line, it does not start another */
function splitLines(s) {
  if (s === '') return []
  const lines = s.split('\n')
  if (s.endsWith('\n')) lines.pop()
  return lines
}

/** Myers' O(ND) shortest edit script: [{kind: ' ' | '-' | '+', text}] */
export function editScript(a, b) {
  const n = a.length,
    m = b.length,
    max = n + m
  const offset = max + 1
  const v = new Int32Array(2 * max + 3)
  const trace = []
  let found = n === 0 && m === 0
  for (let d = 0; d <= max && !found; d++) {
    trace.push(v.slice())
    for (let k = -d; k <= d; k += 2) {
      // down (an insertion) from k+1, or right (a deletion) from k-1, whichever reached further
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1
      let y = x - k
      while (x < n && y < m && a[x] === b[y]) (x++, y++)
      v[offset + k] = x
      if (x >= n && y >= m) {
        found = true
        break
      }
    }
  }
  // walk back through the snapshots: each d step is one edit plus the diagonal after it
  const out = []
  let x = n,
    y = m
  for (let d = trace.length - 1; d >= 0; d--) {
    const vd = trace[d]
    const k = x - y
    const down = k === -d || (k !== d && vd[offset + k - 1] < vd[offset + k + 1])
    const prevK = down ? k + 1 : k - 1
    const prevX = d === 0 ? 0 : vd[offset + prevK]
    const prevY = d === 0 ? 0 : prevX - prevK
    while (x > prevX && y > prevY) (out.push({ kind: ' ', text: a[--x] }), y--)
    if (d > 0) {
      if (down) out.push({ kind: '+', text: b[--y] })
      else out.push({ kind: '-', text: a[--x] })
    }
  }
  while (x > 0 && y > 0) (out.push({ kind: ' ', text: a[--x] }), y--)
  return out.reverse()
}

/** the hunks' ranges over the edit script: changes at most 2 × CONTEXT apart share one */
function hunks(edits) {
  const changes = edits.flatMap((e, i) => (e.kind === ' ' ? [] : [i]))
  const groups = []
  for (const i of changes) {
    const last = groups.at(-1)
    if (last && i - last.at(-1) <= 2 * CONTEXT) last.push(i)
    else groups.push([i])
  }
  const ranges = []
  for (const g of groups) {
    const r = { start: Math.max(0, g[0] - CONTEXT), end: Math.min(edits.length, g.at(-1) + CONTEXT + 1) }
    const prev = ranges.at(-1)
    if (prev && r.start < prev.end) prev.end = Math.max(prev.end, r.end)
    else ranges.push(r)
  }
  return ranges
}

/** the unified diff of two texts; '' when they are equal */
export function diff(a, b) {
  if (a === b) return ''
  const aLines = splitLines(a),
    bLines = splitLines(b)
  const count = (s) => s.split('\n').length - 1
  if (count(a) + count(b) > MAX_LINES) return `@@ -1,${count(a)} +1,${count(b)} @@ diff too large to display\n`
  const edits = editScript(aLines, bLines)
  let out = '--- a\n+++ b\n'
  for (const { start, end } of hunks(edits)) {
    let aStart = 1,
      bStart = 1
    for (let i = 0; i < start; i++) {
      if (edits[i].kind !== '+') aStart++
      if (edits[i].kind !== '-') bStart++
    }
    const body = edits.slice(start, end)
    const aLen = body.filter((e) => e.kind !== '+').length
    const bLen = body.filter((e) => e.kind !== '-').length
    // an empty side names the line before it (go-stdlib calculateHunkHeader)
    out += `@@ -${aLen === 0 && aStart > 0 ? aStart - 1 : aStart},${aLen} +${bLen === 0 && bStart > 0 ? bStart - 1 : bStart},${bLen} @@\n`
    for (const e of body) out += `${e.kind}${e.text}\n`
  }
  return out
}
