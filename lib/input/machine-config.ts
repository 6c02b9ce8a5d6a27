// A node's machine config, read and parsed once per process: every check (the inventory's, the CNI's,
// the install target, discovery, the redactor) asks this object instead of parsing the file again.
import { readFileSync, statSync } from 'node:fs'
import { type Document, isMap, isScalar, LineCounter, parseAllDocuments } from 'yaml'

export interface InstallTarget {
  disk?: string
  selector?: Record<string, unknown>
}

export class MachineConfig {
  private static readonly cache = new Map<string, MachineConfig>()

  /** The file as text; undefined when it cannot be read (`readError` says why). */
  readonly source: string | undefined
  readonly readError: NodeJS.ErrnoException | undefined
  /** Every YAML document of the file, with line positions. */
  readonly documents: Document[]
  readonly lines = new LineCounter()

  private constructor(readonly path: string) {
    let source: string | undefined
    let readError: NodeJS.ErrnoException | undefined
    try {
      source = readFileSync(path, 'utf8')
    } catch (err) {
      readError = err as NodeJS.ErrnoException
    }
    this.source = source
    this.readError = readError
    const docs = source === undefined ? [] : parseAllDocuments(source, { lineCounter: this.lines })
    this.documents = Array.isArray(docs) ? docs : []
  }

  /** The config at `path`, parsed once (again only when the file changed). */
  static of(path: string): MachineConfig {
    let stamp = 'missing'
    try {
      const stat = statSync(path)
      stamp = `${stat.mtimeMs}:${stat.size}`
    } catch {
      // unreadable: the constructor records why
    }
    const key = `${path}\0${stamp}`
    let config = MachineConfig.cache.get(key)
    if (!config) {
      config = new MachineConfig(path)
      MachineConfig.cache.set(key, config)
    }
    return config
  }

  get syntaxOk(): boolean {
    return this.documents.every((d) => d.errors.length === 0)
  }

  /** The v1alpha1 document (`version: v1alpha1` without a kind), the first when there are several. */
  get v1alpha1(): Document | undefined {
    return this.documents.find((d) => isMap(d.contents) && d.get('version') === 'v1alpha1' && d.get('kind') === undefined)
  }

  /** The 1-based line of the key of the deepest part of `keys` the document has (`network:` when it has no `cni`). */
  lineOf(doc: Document, keys: ReadonlyArray<string | number>): number | undefined {
    for (let depth = keys.length; depth > 0; depth--) {
      const parent = depth === 1 ? doc.contents : doc.getIn(keys.slice(0, depth - 1), true)
      if (!isMap(parent)) continue
      const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === keys[depth - 1])
      const range = (pair?.key as { range?: [number, number, number] } | undefined)?.range
      if (range) return this.lines.linePos(range[0]).line
    }
    return undefined
  }

  /** Each document as plain values (a document that cannot be converted is left out). */
  values(): unknown[] {
    return this.documents.flatMap((d) => {
      try {
        return [d.toJS() as unknown]
      } catch {
        return []
      }
    })
  }

  /** machine.install.image: the installer an ISO node pulls to install itself, when the config names one. */
  installImage(): string | undefined {
    for (const value of this.values()) {
      const image = (value as { machine?: { install?: { image?: unknown } } } | null)?.machine?.install?.image
      if (typeof image === 'string' && image) return image
    }
    return undefined
  }

  /** The install disk or selector the config asks for, when it asks for one. */
  installTarget(): InstallTarget | undefined {
    for (const value of this.values()) {
      const install = (value as { machine?: { install?: { disk?: unknown; diskSelector?: unknown } } } | null)?.machine?.install
      if (!install) continue
      const target: InstallTarget = {}
      if (typeof install.disk === 'string' && install.disk) target.disk = install.disk
      if (install.diskSelector && typeof install.diskSelector === 'object')
        target.selector = install.diskSelector as Record<string, unknown>
      if (target.disk || target.selector) return target
    }
    return undefined
  }

  /** The Talos version of the installer image the config asks for (`machine.install.image`'s tag, `v1.13.7`), when it has one. */
  installerVersion(): string | undefined {
    for (const value of this.values()) {
      const image = (value as { machine?: { install?: { image?: unknown } } } | null)?.machine?.install?.image
      if (typeof image !== 'string') continue
      const tag = /:(v\d+\.\d+\.\d+[^@]*)(?:@|$)/.exec(image)?.[1]
      if (tag) return tag
    }
    return undefined
  }

  /**
   * cluster.discovery.enabled with the service registry on (Talos's default when absent: off,
   * pkg/machinery/config/types/v1alpha1/v1alpha1_discoveryconfig.go). The kubernetes registry
   * needs the API, so it finds nobody before the bootstrap.
   */
  get discovery(): boolean {
    for (const value of this.values()) {
      const discovery = (
        value as { cluster?: { discovery?: { enabled?: unknown; registries?: { service?: { disabled?: unknown } } } } } | null
      )?.cluster?.discovery
      if (discovery) return discovery.enabled === true && discovery.registries?.service?.disabled !== true
    }
    return false
  }
}
