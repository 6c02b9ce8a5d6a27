/**
 * One reading shared by every node step that asks within `maxAgeMs` (one `kubectl get nodes`
 * serves all nodes of a poll round instead of one call per node).
 */
export class SharedReading<T> {
  private last: { at: number; value: Promise<T> } | undefined

  constructor(
    private readonly read: () => Promise<T>,
    private readonly maxAgeMs: number,
  ) {}

  get(): Promise<T> {
    const now = performance.now()
    if (!this.last || now - this.last.at >= this.maxAgeMs) {
      const value = this.read()
      this.last = { at: now, value }
      // a failed reading is not reused: the next caller reads again
      value.catch(() => {
        if (this.last?.value === value) this.last = undefined
      })
    }
    return this.last.value
  }
}
