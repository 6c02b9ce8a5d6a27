// The machine configs come from the operator's own generator, run before anything reads them: for a
// talhelper repository `talhelper genconfig` (and `talhelper gensecret` once, when there is no secrets
// file), for a topf repository `topf render` and `topf talosconfig`. They run only when what they wrote
// is missing or older than what it is made from, so an edited talconfig.yaml or patch is never applied
// through a stale config (the field's "I lost access to the cluster"). docs/inventory.md, "Generating".
import { existsSync, linkSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { InputError } from '../core/errors.ts'
import { formatDuration } from '../core/duration.ts'
import { toolAvailable } from '../tools/exec.ts'
import { sopsEncrypt, SOPS_ENV } from '../tools/sops.ts'
import * as talhelper from '../tools/talhelper.ts'
import * as topf from '../tools/topf.ts'
import { inventoryLayout, loadInventory, readTalhelperLayout, type InventoryOptions } from './inventory.ts'
import { TALENV_FILES } from './talhelper.ts'
import { readTopfLayout, topfConfigFile, topfInputs, TOPF_FILE, TOPF_OUT_DIR, TOPF_RENDER } from './topf.ts'

export interface GenerateOptions {
  /** false with --no-generate: stale configs are bad input instead */
  generate: boolean
  dryRun: boolean
  env: NodeJS.ProcessEnv
  /** one line of the visible generate step */
  say: (line: string) => void
  warn: (line: string) => void
}

/** What a generator wrote and what it wrote it from. */
interface Generated {
  outputs: string[]
  inputs: string[]
}

/**
 * Files written within this long of each other were written together: a `git clone` or a copy of the
 * cluster directory writes inputs and outputs in one pass, in no particular order, and must not make
 * the configs look stale. An edit after a generator run comes later than that.
 */
export const WRITTEN_TOGETHER_MS = 2000

/** Outputs missing, and inputs changed after the oldest output was written. */
export function staleness({ outputs, inputs }: Generated): { missing: string[]; newer: string[] } {
  const mtime = (path: string): number | undefined => statSync(path, { throwIfNoEntry: false })?.mtimeMs
  const missing = outputs.filter((f) => mtime(f) === undefined)
  const written = outputs.map(mtime).filter((t): t is number => t !== undefined)
  if (written.length === 0) return { missing, newer: [] }
  const oldest = Math.min(...written)
  return { missing, newer: [...new Set(inputs)].filter((f) => (mtime(f) ?? 0) > oldest + WRITTEN_TOGETHER_MS) }
}

const fresh = (state: { missing: string[]; newer: string[] }): boolean => state.missing.length === 0 && state.newer.length === 0

/** Runs the cluster directory's generator when its output is missing or stale (the `generate` step). */
export function generateConfigs(clusterDir: string, inventory: InventoryOptions, options: GenerateOptions): void {
  const dir = resolve(clusterDir)
  if (!existsSync(dir)) return // loadInventory names it
  const layout = inventoryLayout(dir, inventory)
  if (layout === 'nodes') return
  // the inventory's own mistakes (a duplicate name, a bad address) are said as such, before any generator runs
  loadInventory(dir, { ...inventory, env: options.env, withoutConfigs: true })
  if (layout === 'talhelper') generateTalhelper(dir, inventory, options)
  else if (layout === 'topf') generateTopf(dir, options)
}

function describe(dir: string, outDir: string, state: { missing: string[]; newer: string[] }): string {
  const rel = (f: string): string => relative(dir, f) || f
  const parts: string[] = []
  if (state.missing.length) parts.push(`${rel(outDir)}/ lacks ${state.missing.map((f) => relative(outDir, f)).join(', ')}`)
  if (state.newer.length) parts.push(`${state.newer.map(rel).join(', ')} changed after ${rel(outDir)}/ was written`)
  return parts.join('; ')
}

/** Every existing file of the cluster directory a talconfig string references as `@<file>` (patches, schematics). */
function referencedFiles(dir: string, value: unknown): string[] {
  if (typeof value === 'string') {
    if (!value.startsWith('@')) return []
    const path = resolve(dir, value.slice(1).trim())
    return statSync(path, { throwIfNoEntry: false })?.isFile() ? [path] : []
  }
  if (Array.isArray(value)) return value.flatMap((v) => referencedFiles(dir, v))
  if (value !== null && typeof value === 'object') return Object.values(value).flatMap((v) => referencedFiles(dir, v))
  return []
}

function generateTalhelper(dir: string, inventory: InventoryOptions, options: GenerateOptions): void {
  const talconfigRel = inventory.talconfig ?? 'talconfig.yaml'
  const talconfig = resolve(dir, talconfigRel)
  if (!existsSync(talconfig)) return // loadInventory names it
  const layout = readTalhelperLayout(dir, talconfig, inventory)
  const outDirRel = relative(dir, layout.outDir) || '.'
  const secrets = talhelper.TALSECRET_FILES.map((f) => join(dir, f)).filter((f) => existsSync(f))
  const generated: Generated = {
    outputs: [...layout.raw.flatMap((n) => (typeof n.configFile === 'string' ? [n.configFile] : [])), join(layout.outDir, 'talosconfig')],
    inputs: [
      talconfig,
      ...TALENV_FILES.map((f) => join(dir, f)).filter((f) => existsSync(f)),
      ...secrets,
      ...referencedFiles(dir, layout.strings),
    ],
  }
  const state = staleness(generated)
  if (fresh(state)) return
  const command = talhelper.genconfigCommand(talconfigRel, outDirRel)
  const why = describe(dir, layout.outDir, state)
  const before = secrets.length === 0 ? `talhelper gensecret > ${secretsTarget(dir).name}, then ` : ''
  if (!options.generate)
    throw new InputError(`the machine configs are out of date: ${why}`, {
      file: layout.outDir,
      fix: `run ${before}\`${command}\` in ${dir}, or run again without --no-generate (the tool then runs it)`,
    })
  if (options.dryRun) {
    options.say(`generate: ${why}: a run would run ${before}${command} in ${dir}; this dry run reads the configs as they are`)
    return
  }
  // only missing files and no talhelper: the inventory names each missing config with its fix
  if (!toolAvailable(options.env, 'talhelper') && state.newer.length === 0) return
  if (!toolAvailable(options.env, 'talhelper'))
    throw new InputError(`the machine configs are out of date (${why}) and talhelper is not on PATH to regenerate them`, {
      file: layout.outDir,
      fix: `install talhelper (or point TALHELPER at it), or run ${before}\`${command}\` in ${dir} yourself`,
    })
  options.say(`generate: ${why}: running ${before}${command} in ${dir}`)
  const started = performance.now()
  if (secrets.length === 0) writeSecrets(dir, options)
  const result = talhelper.genconfig(options.env, dir, talconfigRel, outDirRel)
  if (!result.ok)
    throw new InputError(`talhelper genconfig failed: ${talhelper.talhelperFailure(result)}`, {
      file: talconfig,
      fix: `correct what talhelper names, then run the same command again (\`${command}\` in ${dir} shows talhelper's whole output)`,
    })
  options.say(
    `generate: talhelper genconfig wrote the configs of ${generated.outputs.length - 1} node(s) and the talosconfig into ${layout.outDir} (${formatDuration(performance.now() - started)})`,
  )
}

/** The secrets bundles a generator reads (talhelper's talsecret files, topf's default secrets.yaml), where they exist. */
export function generatorSecretFiles(clusterDir: string): string[] {
  const dir = resolve(clusterDir)
  return [...talhelper.TALSECRET_FILES, 'secrets.yaml', 'secrets.sops.yaml'].map((f) => join(dir, f)).filter((f) => existsSync(f))
}

/** `.sops.yaml` in the cluster directory or above it (where sops looks for it): the secrets file is then encrypted. */
function sopsConfigFor(dir: string): string | undefined {
  for (let at = dir; ; at = dirname(at)) {
    if (existsSync(join(at, '.sops.yaml'))) return join(at, '.sops.yaml')
    if (dirname(at) === at) return undefined
  }
}

function secretsTarget(dir: string): { name: string; sopsConfig: string | undefined } {
  const sopsConfig = sopsConfigFor(dir)
  return { name: sopsConfig ? 'talsecret.sops.yaml' : 'talsecret.yaml', sopsConfig }
}

/** `talhelper gensecret` into the secrets file genconfig reads; encrypted on the way in when .sops.yaml is there. */
function writeSecrets(dir: string, options: GenerateOptions): void {
  const target = secretsTarget(dir)
  const path = join(dir, target.name)
  const result = talhelper.gensecret(options.env, dir)
  if (!result.ok)
    throw new InputError(`talhelper gensecret failed: ${talhelper.talhelperFailure(result)}`, {
      file: dir,
      fix: 'run `talhelper gensecret` in the cluster directory to see why, then run the same command again',
    })
  let text = result.stdout
  if (target.sopsConfig) {
    const encrypted = sopsEncrypt(path, text, options.env, dir)
    if (!encrypted.ok)
      throw new InputError(
        encrypted.missing
          ? `the new secrets must be encrypted (${target.sopsConfig} is there) and sops is not on PATH ("${encrypted.binary}")`
          : `sops could not encrypt the new ${target.name}: ${encrypted.message}`,
        {
          file: target.sopsConfig,
          fix: `install sops (or point ${SOPS_ENV} at it) and give .sops.yaml a creation rule that matches ${relative(dirname(target.sopsConfig), path)}; nothing was written`,
        },
      )
    text = encrypted.text
  } else {
    options.warn(
      `${path} holds the cluster's secrets in plain text (no .sops.yaml above ${dir}): keep it out of git, or encrypt it with sops`,
    )
  }
  // written whole or not at all (a half-written secrets file would become the cluster's PKI), and
  // never over one another run wrote meanwhile: linked into place, which fails when the name exists
  const partial = join(dir, `.${target.name}.${process.pid}.partial`)
  writeFileSync(partial, text, { mode: 0o600 })
  try {
    linkSync(partial, path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    options.say(`generate: ${target.name} appeared meanwhile (another run wrote it): it is kept, and ours dropped`)
    return
  } finally {
    rmSync(partial, { force: true })
  }
  options.say(
    `generate: talhelper gensecret wrote ${target.name}${target.sopsConfig ? ` (encrypted with sops under ${target.sopsConfig})` : ''}`,
  )
}

function generateTopf(dir: string, options: GenerateOptions): void {
  const layout = readTopfLayout(dir, join(dir, TOPF_FILE), options.env)
  const talosconfig = join(layout.outDir, 'talosconfig')
  const hosts = layout.nodes.flatMap((n) => (typeof n.host === 'string' && n.role ? [{ host: n.host, role: n.role }] : []))
  const configs: Generated = {
    outputs: hosts.map((n) => topfConfigFile(layout, n.host)),
    inputs: hosts.flatMap((n) => topfInputs(layout, n.host, n.role)),
  }
  const client: Generated = {
    outputs: [talosconfig],
    inputs: [layout.file.path, ...(existsSync(layout.secretsPath) ? [layout.secretsPath] : [])],
  }
  const renderState = staleness(configs)
  const clientState = staleness(client)
  if (fresh(renderState) && fresh(clientState)) return
  const why = describe(dir, layout.outDir, {
    missing: [...renderState.missing, ...clientState.missing],
    newer: [...new Set([...renderState.newer, ...clientState.newer])],
  })
  if (!options.generate)
    throw new InputError(`the machine configs are out of date: ${why}`, {
      file: layout.outDir,
      fix: `run \`${TOPF_RENDER}\` in ${dir}, or run again without --no-generate (the tool then runs it)`,
    })
  if (options.dryRun) {
    options.say(`generate: ${why}: a run would run ${TOPF_RENDER} in ${dir}; this dry run reads the configs as they are`)
    return
  }
  if (!toolAvailable(options.env, 'topf'))
    throw new InputError(`the machine configs are out of date (${why}) and topf is not on PATH to render them`, {
      file: layout.outDir,
      fix: `run \`${TOPF_RENDER}\` in ${dir} (or install topf, or point TOPF at it, and run the same command again)`,
    })
  options.say(`generate: ${why}: running ${TOPF_RENDER} in ${dir}`)
  const started = performance.now()
  const rendered = topf.render(options.env, dir, TOPF_OUT_DIR)
  if (!rendered.ok)
    throw new InputError(`topf render failed: ${topf.topfFailure(rendered)}`, {
      file: layout.file.path,
      fix: `correct what topf names (topf.yaml or a patch), then run the same command again (\`topf render -o ${TOPF_OUT_DIR}\` in ${dir} shows topf's whole output)`,
    })
  const printed = topf.talosconfig(options.env, dir)
  if (!printed.ok)
    throw new InputError(`topf talosconfig failed: ${topf.topfFailure(printed)}`, {
      file: layout.file.path,
      fix: `correct what topf names, then run the same command again (\`topf talosconfig\` in ${dir} shows topf's whole output)`,
    })
  const partial = join(layout.outDir, '.talosconfig.partial')
  writeFileSync(partial, printed.stdout, { mode: 0o600 })
  renameSync(partial, talosconfig)
  options.say(
    `generate: topf wrote the configs of ${hosts.length} node(s) and the talosconfig into ${layout.outDir} (${formatDuration(performance.now() - started)})`,
  )
}
