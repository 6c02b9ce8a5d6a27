import {
  isMap,
  isSeq,
  LineCounter,
  parseAllDocuments,
  parseDocument,
  visit,
  type Document,
  type Node as YamlNode,
  type YAMLError,
} from 'yaml'
import { InputError } from '../core/errors.ts'
import { readErrorCode, readRegularFile } from '../core/files.ts'

/** A parsed YAML file that can say on which line a value stands, for `<file>:<line>:` errors. */
export class YamlFile {
  readonly path: string
  private readonly doc: Document
  private readonly lines: LineCounter
  private constructor(path: string, doc: Document, lines: LineCounter) {
    this.path = path
    this.doc = doc
    this.lines = lines
  }

  static read(path: string, fix: string): YamlFile {
    let text: string
    try {
      text = readRegularFile(path)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      throw new InputError(code === 'ENOENT' ? 'file not found' : `cannot read file (${readErrorCode(err)})`, { file: path, fix })
    }
    return YamlFile.parse(path, text)
  }

  static parse(path: string, text: string): YamlFile {
    const lines = new LineCounter()
    const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: true })
    const error = syntaxError(path, doc.errors)
    if (error) throw error
    return new YamlFile(path, doc, lines)
  }

  /** The first syntax error of a file of one or more `---` documents (a machine config), as an input error. */
  static checkSyntax(path: string, text: string): InputError | undefined {
    const docs: ReadonlyArray<{ errors: YAMLError[] }> = parseAllDocuments(text, { prettyErrors: true })
    return syntaxError(
      path,
      docs.flatMap((d) => d.errors),
    )
  }

  toJS(): unknown {
    return documentToJS(this.doc, this.path, this.lines)
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

/**
 * A document as plain values. The yaml library refuses aliases that expand past its limit (an "alias
 * bomb": a few lines that grow to gigabytes) with a ReferenceError: that is bad input, with the line
 * of the first alias.
 */
export function documentToJS(doc: Document, path: string, lines?: LineCounter): unknown {
  try {
    return doc.toJS()
  } catch (err) {
    if (!(err instanceof ReferenceError) || !/alias/i.test(err.message)) throw err
    let offset: number | undefined
    visit(doc, {
      Alias(_key, node) {
        offset = node.range?.[0]
        return visit.BREAK
      },
    })
    const line = lines && offset !== undefined ? lines.linePos(offset).line : undefined
    throw new InputError(`YAML aliases expand too far (${err.message})`, {
      file: path,
      ...(line ? { line } : {}),
      fix: 'write the values out instead of repeating nested aliases',
    })
  }
}

function syntaxError(path: string, errors: readonly YAMLError[]): InputError | undefined {
  const first = errors[0]
  if (!first) return undefined
  const line = first.linePos?.[0]?.line
  // the yaml library ends its message with " at line L, column C:"; the line goes in front
  const column = first.linePos?.[0]?.col
  const what = first.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? first.message
  return new InputError(`YAML syntax error${column ? ` at column ${column}` : ''}: ${what}`, {
    file: path,
    ...(line ? { line } : {}),
    fix: 'correct the YAML syntax at that line',
  })
}
