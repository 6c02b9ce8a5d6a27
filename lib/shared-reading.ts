/**
 * One reading shared by every node step that asks within `maxAgeMs` (one `kubectl get nodes`
 * serves all nodes of a poll round instead of one call per node). A reading still in flight is
 * always shared, and its age counts from when it answered: a call slower than `maxAgeMs` (a loaded
 * machine, a slow API) must not turn into one call per node.
 */
export class SharedReading<T> {
  private last: { at: number; pending: boolean; value: Promise<T> } | undefined

  constructor(
    private readonly read: () => Promise<T>,
    private readonly maxAgeMs: number,
  ) {}

  get(): Promise<T> {
    const last = this.last
    if (last && (last.pending || performance.now() - last.at < this.maxAgeMs)) return last.value
    const entry = { at: performance.now(), pending: true, value: this.read() }
    this.last = entry
    entry.value.then(
      () => {
        entry.pending = false
        entry.at = performance.now()
      },
      // a failed reading is not reused: the next caller reads again
      () => {
        if (this.last === entry) this.last = undefined
      },
    )
    return entry.value
  }
}
