// talosctl validate (offline): the checks of §4.3 the product relies on
import { io, local } from '../../cli-io.js'
import fs from 'node:fs'

const multi = (errs) => `${errs.length === 1 ? '1 error occurred:' : `${errs.length} errors occurred:`}\n${errs.map((e) => `\t* ${e}`).join('\n')}\n\n`

export async function validate({ flag }) {
  const file = flag('config')
  let text
  try { text = fs.readFileSync(local(file), 'utf8') } catch (e) {
    throw new Error(`open ${file}: ${e.code === 'ENOENT' ? 'no such file or directory' : e.code === 'EISDIR' ? 'is a directory' : e.message}`)
  }
  const mode = flag('mode')
  if (!['metal', 'cloud', 'container', 'metal-agent'].includes(mode)) throw new Error(`unknown runtime mode: ${JSON.stringify(mode)}`)
  const YAML = await import('yaml')
  let docs
  try {
    docs = YAML.parseAllDocuments(text).map((d) => { if (d.errors.length) throw d.errors[0]; return d.toJS() }).filter((d) => d != null)
  } catch (e) {
    throw new Error(`failed to parse config: ${e.message.split('\n')[0]}`)
  }
  const v1 = docs.find((d) => d.version === 'v1alpha1' || (d.machine && !d.kind))
  const errs = []
  if (v1) {
    const m = v1.machine ?? {}
    const inner = []
    const install = m.install
    const type = m.type
    if (type && !['init', 'controlplane', 'worker'].includes(type)) inner.push(`unknown machine type ${JSON.stringify(type)}`)
    if (mode === 'metal' || mode === 'metal-agent') {
      if (!install) inner.push('install instructions are required in "metal" mode')
      else if (!install.disk && !install.diskSelector) inner.push('either install disk or diskSelector should be defined')
    }
    if (install && install.extraKernelArgs?.length && install.grubUseUKICmdline) inner.push("install.extraKernelArgs and install.grubUseUKICmdline can't be used together")
    if (install?.diskSelector?.name !== undefined) inner.push('install disk selector is invalid: selector on name is not supported')
    if (!m.ca) inner.push('issuing CA is required (.machine.ca)')
    else if ((type === 'controlplane' || type === 'init') && !m.ca.key) inner.push('issuing CA key is required for controlplane nodes (.machine.ca.key)')
    else if (type === 'worker' && m.ca.key) inner.push('issuing Talos API CA key is not allowed on non-controlplane nodes (.machine.ca)')
    if (inner.length) errs.push(`v1alpha1.Config: ${multi(inner)}`)
  }
  // nested go-multierror: each level adds its own trailing blank line
  if (errs.length) throw new Error(multi(errs))
  io().stdout.write(`${file} is valid for ${mode} mode\n`)
}
