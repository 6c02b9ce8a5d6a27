// A list-and-watch cache of one Kubernetes collection (client-go's informer, in small), for the
// simulator's own clients of the real API server (SIM_KUBE=real: sim/kubelet.js).
import https from 'node:https'

/**
 * A list-and-watch cache of one collection (`path`, e.g. /api/v1/pods), as client-go's informers keep
 * one: a list from the API server's watch cache (resourceVersion=0), then a watch from its
 * resourceVersion, events applied as they come; a watch that ends is resumed, an expired one (410)
 * lists again. `items()` is null while it is not in step (before its list, while the API server is
 * away): the caller reads with a list of its own then, and meets what a client meets.
 */
export class Informer {
  /** client: a KubeClient (its agent and credentials); onChange: called after each applied event */
  constructor(client, path, onChange = () => {}) {
    this.client = client
    this.path = path
    this.onChange = onChange
    this.objects = null // uid -> object, while in step
    this.rv = null
    this.req = null
    this.stopped = false
    this.timer = null
  }
  items() {
    return this.objects ? [...this.objects.values()] : null
  }
  start() {
    this.stopped = false
    this.list()
  }
  stop() {
    this.stopped = true
    this.objects = null
    clearTimeout(this.timer)
    this.req?.destroy()
    this.req = null
  }
  /** in a moment (the API server away or the watch refused), list again */
  retry() {
    this.objects = null
    this.req = null
    if (!this.stopped) this.timer = setTimeout(() => this.list(), 500)
  }
  async list() {
    if (this.stopped) return
    try {
      const r = await this.client.request('GET', this.path, undefined, { query: { resourceVersion: '0' } })
      if (this.stopped) return
      if (r.status !== 200) return this.retry()
      this.objects = new Map((r.body.items ?? []).map((o) => [o.metadata.uid, o]))
      this.rv = r.body.metadata?.resourceVersion
      this.onChange()
      this.watch()
    } catch {
      this.retry()
    }
  }
  watch() {
    const { cfg, agent, url, userAgent } = this.client
    const q = new URLSearchParams({ watch: '1', resourceVersion: this.rv, allowWatchBookmarks: 'true' })
    const headers = { 'User-Agent': userAgent, Accept: 'application/json' }
    if (cfg.token) headers.Authorization = `Bearer ${cfg.token}`
    const req = https.request(`${url.origin}${this.path}?${q}`, { agent, headers })
    this.req = req
    req.on('error', () => this.req === req && this.retry())
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume()
        return this.retry()
      }
      let buf = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => {
        buf += chunk
        let nl
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl)
          buf = buf.slice(nl + 1)
          if (line.trim()) this.event(JSON.parse(line))
        }
      })
      // the API server ends a watch after a while (--min-request-timeout): resumed from where it was
      res.on('end', () => {
        if (this.req !== req || this.stopped) return
        if (this.objects) this.watch()
        else this.retry()
      })
      res.on('error', () => this.req === req && this.retry())
    })
    req.end()
  }
  event({ type, object }) {
    if (!this.objects) return
    if (type === 'ERROR') {
      // 410 Gone (the resourceVersion compacted away) or another refusal: list again
      this.req?.destroy()
      return this.retry()
    }
    this.rv = object.metadata?.resourceVersion ?? this.rv
    if (type === 'BOOKMARK') return
    if (type === 'DELETED') this.objects.delete(object.metadata.uid)
    else this.objects.set(object.metadata.uid, object)
    this.onChange()
  }
}
