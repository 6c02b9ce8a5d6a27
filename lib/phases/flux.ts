import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { NodeError } from '../classify.js'
import { formatDuration } from '../duration.js'
import { fluxHint, taskCommand } from '../hints.js'
import { InputError } from '../errors.js'
import type { Phase, StepReporter } from '../phase.js'
import { pollUntil, PollTimeout, type PollAnswer } from '../poll.js'
import type { Run } from '../run.js'
import type { FluxSettings } from '../settings.js'
import { condition, type KubeObject } from '../tools/kubectl.js'

function fluxSettings(run: Run): FluxSettings {
  const flux = run.settings.flux
  if (!flux) throw new NodeError('flux', 'no flux section in bootstrap.yaml', `add flux: {mode, kustomization, git} to bootstrap.yaml (docs/settings.md), then run: ${taskCommand('bootstrap:flux')}`)
  return flux
}

function rootKustomization(flux: FluxSettings): { namespace: string; name: string } {
  const [namespace = 'flux-system', name = 'flux-system'] = flux.kustomization.split('/')
  return { namespace, name }
}

async function rootReady(run: Run, flux: FluxSettings): Promise<boolean> {
  const { namespace, name } = rootKustomization(flux)
  try {
    const ks = await run.kubectl.get('kustomizations.kustomize.toolkit.fluxcd.io', name, namespace)
    return condition(ks, 'Ready')?.status === 'True'
  } catch {
    // no Flux CRDs yet: not installed
    return false
  }
}

/** Secrets Flux needs before it starts (SOPS age key, git credentials), applied with kubectl. */
async function applySecrets(run: Run, report: StepReporter): Promise<string> {
  const flux = fluxSettings(run)
  if (flux.secrets.length === 0 && !flux.sopsAgeKeyFile) return 'no secrets to apply'
  const { namespace } = rootKustomization(flux)
  const dir = mkdtempSync(join(tmpdir(), 'talos-bootstrap-'))
  try {
    const nsFile = join(dir, 'namespace.yaml')
    writeFileSync(nsFile, `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${namespace}\n`)
    await run.kubectl.applyFile(nsFile)
    const files = flux.secrets.map((file) => resolve(run.inventory.clusterDir, file))
    if (flux.sopsAgeKeyFile) {
      // the key goes through a private temporary manifest, never a command line
      const key = readFileSync(resolve(run.inventory.clusterDir, flux.sopsAgeKeyFile))
      const manifest = join(dir, 'sops-age.yaml')
      writeFileSync(manifest, `apiVersion: v1\nkind: Secret\nmetadata:\n  name: sops-age\n  namespace: ${namespace}\ntype: Opaque\ndata:\n  age.agekey: ${key.toString('base64')}\n`, { mode: 0o600 })
      files.push(manifest)
    }
    for (const file of files) {
      report.progress(`kubectl apply -f ${file}`)
      await run.kubectl.applyFile(file)
    }
    return `${files.length} secret manifest(s) applied`
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function installFlux(run: Run, report: StepReporter): Promise<string> {
  const flux = fluxSettings(run)
  if (!run.options.dryRun && (await rootReady(run, flux))) return `already installed, ${flux.kustomization} Ready`
  report.progress('flux check --pre')
  await run.flux.checkPre()
  const key = flux.git?.privateKeyFile ? resolve(run.inventory.clusterDir, flux.git.privateKeyFile) : undefined
  report.progress(flux.mode === 'bootstrap' ? `flux bootstrap git ${flux.git?.url ?? ''}` : 'flux install')
  try {
    await run.flux.install(flux, key, run.settings.fluxTimeoutMs)
  } catch (err) {
    run.facts.cluster.fluxInstallFailed = true
    throw err
  }
  return flux.mode === 'bootstrap' ? `bootstrapped from ${flux.git?.url ?? ''}` : 'installed'
}

function describeNotReady(list: KubeObject[]): string {
  return list
    .map((ks) => {
      const ready = condition(ks, 'Ready')
      return `${ks.metadata.namespace ?? ''}/${ks.metadata.name}: ${ready ? `${ready.reason ?? ready.status}: ${ready.message ?? ''}` : 'not reconciled yet'}`
    })
    .join('; ')
}

async function waitRoot(run: Run, report: StepReporter): Promise<string> {
  const flux = fluxSettings(run)
  const { namespace, name } = rootKustomization(flux)
  let notReady: KubeObject[] = []
  try {
    return await pollUntil(
      async (): Promise<PollAnswer<string>> => {
        const all = await run.kubectl.list('kustomizations.kustomize.toolkit.fluxcd.io', { allNamespaces: true })
        if (run.options.dryRun) return { done: true, value: 'dry run' }
        notReady = all.filter((ks) => condition(ks, 'Ready')?.status !== 'True')
        const root = all.find((ks) => ks.metadata.name === name && ks.metadata.namespace === namespace)
        if (root && condition(root, 'Ready')?.status === 'True') return { done: true, value: `${flux.kustomization} Ready: ${condition(root, 'Ready')?.message ?? ''}` }
        return { done: false, state: root ? describeNotReady(notReady) : `${flux.kustomization} not created yet` }
      },
      { intervalMs: run.settings.pollIntervalMs, timeoutMs: run.settings.fluxTimeoutMs, signal: run.signal, onState: (s) => report.progress(s) },
    )
  } catch (err) {
    if (err instanceof PollTimeout) {
      throw new NodeError('flux', `${flux.kustomization} not Ready within ${formatDuration(err.waitedMs)}: ${notReady.length ? describeNotReady(notReady) : err.lastState}`, fluxHint())
    }
    throw err
  }
}

export const flux: Phase = {
  name: 'flux',
  title: 'Hand over to Flux',
  check: async (run) => {
    const settings = run.settings.flux
    if (!settings) throw new InputError('no flux section in bootstrap.yaml', { file: join(run.inventory.clusterDir, 'bootstrap.yaml'), fix: 'add flux: {mode, kustomization, git} (docs/settings.md)' })
    for (const file of [...settings.secrets, ...(settings.git?.privateKeyFile ? [settings.git.privateKeyFile] : []), ...(settings.sopsAgeKeyFile ? [settings.sopsAgeKeyFile] : [])]) {
      const path = resolve(run.inventory.clusterDir, file)
      if (!existsSync(path)) throw new InputError(`${file} named in flux settings not found`, { file: join(run.inventory.clusterDir, 'bootstrap.yaml'), fix: `create ${path} or fix the path` })
    }
  },
  steps: () => [
    { kind: 'cluster', name: 'flux-secrets', title: 'Secrets before Flux', would: 'would apply the secrets Flux needs', run: applySecrets },
    { kind: 'cluster', name: 'flux-install', title: 'Install or bootstrap Flux', would: (r) => `would ${r.settings.flux?.mode ?? 'install'} Flux`, run: installFlux },
    {
      kind: 'cluster',
      name: 'flux-kustomization',
      title: 'Root Kustomization Ready',
      would: 'would wait for the root Kustomization to be Ready',
      // a failed install already names the cause; waiting on would only say it again
      ready: (run) => (run.facts.cluster.fluxInstallFailed ? 'the flux install failed' : true),
      run: waitRoot,
    },
  ],
}
