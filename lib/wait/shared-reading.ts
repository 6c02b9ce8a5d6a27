/**
 * One reading shared by every node step that asks within `maxAgeMs` (one `kubectl get nodes`
 * serves all nodes of a poll round instead of one call per node). A reading still in flight is
 * always shared, and its age counts from when it answered: a call slower than `maxAgeMs` (a loaded
 * machine, a slow API) must not turn into one call per node.
 */
export class SharedReading<T> {
  private last: { at: number; pending: boolean; value: Promise<T> } | undefined

  private readonly read: () => Promise<T>
  private readonly maxAgeMs: number
  constructor(read: () => Promise<T>, maxAgeMs: number) {
    this.read = read
    this.maxAgeMs = maxAgeMs
  }

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

/**
 * Reads of many keys asked for within `windowMs` of each other go out as one batched read of
 * exactly those keys (the nodes of a poll round asking together: one talosctl process, not one
 * each). Each ask reads its key once, so a node polled once per interval is read once per interval.
 * A key the batch did not answer, or a batch that failed, resolves undefined: the caller reads it alone.
 */
export class BatchedReading<K, V> {
  private queue: Map<K, Array<(value: V | undefined) => void>> | undefined

  private readonly read: (keys: K[]) => Promise<Map<K, V>>
  private readonly windowMs: number
  constructor(read: (keys: K[]) => Promise<Map<K, V>>, windowMs: number) {
    this.read = read
    this.windowMs = windowMs
  }

  get(key: K): Promise<V | undefined> {
    if (!this.queue) {
      const queue = new Map<K, Array<(value: V | undefined) => void>>()
      this.queue = queue
      setTimeout(() => void this.flush(queue), this.windowMs)
    }
    const waiting = this.queue.get(key) ?? []
    this.queue.set(key, waiting)
    return new Promise((resolve) => waiting.push(resolve))
  }

  private async flush(queue: Map<K, Array<(value: V | undefined) => void>>): Promise<void> {
    if (this.queue === queue) this.queue = undefined
    const answers = await this.read([...queue.keys()]).catch(() => new Map<K, V>())
    for (const [key, waiting] of queue) for (const resolve of waiting) resolve(answers.get(key))
  }
}
