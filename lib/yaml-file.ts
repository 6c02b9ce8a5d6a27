import { readFileSync } from 'node:fs'
import { isMap, isSeq, LineCounter, parseDocument, type Document, type Node as YamlNode } from 'yaml'
import { InputError } from './errors.js'

/** A parsed YAML file that can say on which line a value stands, for `<file>:<line>:` errors. */
export class YamlFile {
  private constructor(
    readonly path: string,
    private readonly doc: Document,
    private readonly lines: LineCounter,
  ) {}

  static read(path: string, fix: string): YamlFile {
    let text: string
    try {
      text = readFileSync(path, 'utf8')
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      throw new InputError(code === 'ENOENT' ? 'file not found' : `cannot read file (${code ?? 'error'})`, { file: path, fix })
    }
    return YamlFile.parse(path, text)
  }

  static parse(path: string, text: string): YamlFile {
    const lines = new LineCounter()
    const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: true })
    const first = doc.errors[0]
    if (first) {
      const line = first.linePos?.[0]?.line
      // the yaml library ends its message with " at line L, column C:"; the line goes in front
      const column = first.linePos?.[0]?.col
      const what = first.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? first.message
      throw new InputError(`YAML syntax error${column ? ` at column ${column}` : ''}: ${what}`, {
        file: path,
        ...(line ? { line } : {}),
        fix: 'correct the YAML syntax at that line',
      })
    }
    return new YamlFile(path, doc, lines)
  }

  toJS(): unknown {
    return this.doc.toJS()
  }

  /** Line of the value at a path (keys and indexes), or of its nearest existing parent. */
  lineOf(path: ReadonlyArray<string | number>): number | undefined {
    for (let depth = path.length; depth >= 0; depth--) {
      const node = this.doc.getIn(path.slice(0, depth), true) as YamlNode | undefined
      const line = this.nodeLine(node)
      if (line) return line
    }
    return undefined
  }

  /** Line of a map key (better than the value's line for "unknown key" errors). */
  keyLine(path: ReadonlyArray<string | number>, key: string): number | undefined {
    const parent = path.length ? this.doc.getIn(path, true) : this.doc.contents
    if (isMap(parent)) {
      const pair = parent.items.find((item) => String((item.key as { value?: unknown } | null)?.value ?? item.key) === key)
      const keyNode = pair?.key as YamlNode | undefined
      const line = this.nodeLine(keyNode)
      if (line) return line
    }
    return this.lineOf([...path, key])
  }

  error(path: ReadonlyArray<string | number>, message: string, fix: string): InputError {
    const line = this.lineOf(path)
    return new InputError(message, { file: this.path, ...(line ? { line } : {}), fix })
  }

  private nodeLine(node: YamlNode | undefined | null): number | undefined {
    if (!node || typeof node !== 'object' || !('range' in node) || !node.range) return undefined
    if (isSeq(node) || isMap(node) || 'value' in node) return this.lines.linePos(node.range[0]).line
    return undefined
  }
}
