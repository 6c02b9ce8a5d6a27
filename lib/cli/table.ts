/** Left-aligned columns, three spaces apart, the last column unpadded (like talosctl's tables). */
export function formatTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd((widths[i] ?? 0) + 3)))
      .join('')
      .trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}
