// Fault matrix, what a node in maintenance says of its boot (issue 28, items 3 and 6): secure boot on
// with a plain installer image is a named node failure before anything is applied to it, and its hint
// recovers once the image is right; a node that already has a Talos system disk (a disk image) and a
// secure-boot installer on a machine without secure boot are warned about. 127.238.<row>.0/24.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { callsTo, hintOf, nodeIn, runInFreshShell } from '../e2e/harness.js'
import { expectPhase, FAST, nodeRecovery, ROW_TIMEOUT, withCluster } from './helpers.js'

const SECURE_BOOT_INSTALLER =
  'factory.talos.dev/installer-secureboot/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.12.11'

/** Rewrites part of one node's machine config (what regenerating it from another talconfig does). */
function editConfig(clusterDir: string, node: string, from: RegExp, to: string): void {
  const file = join(clusterDir, 'clusterconfig', `e2e-${node}.yaml`)
  const before = readFileSync(file, 'utf8')
  const after = before.replace(from, to)
  if (after === before) throw new Error(`${String(from)} not in ${file}`)
  writeFileSync(file, after)
}

/** Rewrites the installer image of one node's machine config (what regenerating it with another talosImageURL does). */
function setInstaller(clusterDir: string, node: string, image: string): void {
  editConfig(clusterDir, node, /image: ghcr\.io\/siderolabs\/installer:v1\.12\.11/, `image: ${image}`)
}

describe.concurrent('boot state faults', () => {
  it(
    'secure boot on with a plain installer: the node fails in preflight naming both, nothing applied to it; its hint recovers it',
    () =>
      withCluster('127.238.1', { workers: 1, vip: false, nodeOverrides: { 'wrkr-1': { secureBoot: true } } }, async (cluster) => {
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code, result.stderr).toBe(1)
        const report = cluster.report()
        expectPhase(report, 'preflight', { 'cp-1': 'ok', 'wrkr-1': 'failed:config-invalid' }, nodeRecovery)
        const failure = nodeIn(report, 'preflight', 'wrkr-1').error
        expect(failure?.message).toContain('secure boot on')
        expect(failure?.message).toContain('ghcr.io/siderolabs/installer:v1.12.11 is not a secure-boot installer')
        expect(failure?.hint).toContain('installer-secureboot')
        expect(callsTo(cluster.calls(), 'wrkr-1', 'apply')).toEqual([])
        // the others went on
        expect(nodeIn(report, 'wait-ready', 'cp-1').status).toBe('ok')

        setInstaller(cluster.clusterDir, 'wrkr-1', SECURE_BOOT_INSTALLER)
        const { command } = hintOf(result.stderr, 'wrkr-1')
        const recovered = await runInFreshShell(cluster, command)
        expect(recovered.code, `${command}\n${recovered.stderr}`).toBe(0)
        expect(cluster.sim.node('wrkr-1')?.stage).toBe('running')
      }),
    ROW_TIMEOUT,
  )

  it(
    'a node with a Talos system disk already (its installer not used, secure boot or not), and a secure-boot installer on a machine without secure boot: warned, not stopped',
    () =>
      withCluster(
        '127.238.2',
        { workers: 1, vip: false, nodeOverrides: { 'wrkr-1': { image: 'disk', secureBoot: true } } },
        async (cluster) => {
          setInstaller(cluster.clusterDir, 'cp-1', SECURE_BOOT_INSTALLER)
          const result = await cluster.task('bootstrap:preflight', {}, FAST)
          expect(result.code, result.stderr).toBe(0)
          expect(result.stderr).toMatch(
            /wrkr-1: the node already has a Talos system disk \(\/dev\/sda: .*\): Talos takes it as installed and skips machine\.install/,
          )
          expect(result.stderr).toMatch(
            /cp-1: machine\.install\.image factory\.talos\.dev\/installer-secureboot\/\S+ is a secure-boot installer, but the node reports secure boot off/,
          )
          const report = cluster.report()
          expect(nodeIn(report, 'preflight', 'wrkr-1').detail).toMatch(/^maintenance, installed on its system disk \/dev\/sda; warning: /)
          expect(nodeIn(report, 'preflight', 'cp-1').detail).toMatch(
            /^maintenance, installs to \/dev\/sda .*; warning: machine\.install\.image/,
          )
          expect(result.stderr).not.toMatch(/cp-1: the node already has a Talos system disk/)
        },
      ),
    ROW_TIMEOUT,
  )

  it(
    "a config naming a link the node does not have, and validSubnets selecting none of a DHCP node's addresses: named node failures before any apply; fixed, the hint recovers",
    () =>
      withCluster('127.238.6', { workers: 2, vip: false }, async (cluster) => {
        editConfig(cluster.clusterDir, 'wrkr-1', /deviceSelector:\n\s+physical: true/, 'interface: enp9s0')
        editConfig(cluster.clusterDir, 'wrkr-2', /dhcp: false/, 'dhcp: true')
        editConfig(
          cluster.clusterDir,
          'wrkr-2',
          /^( {4}kubelet:\n)/m,
          '$1        nodeIP:\n            validSubnets:\n                - 127.238.99.0/24\n',
        )
        const result = await cluster.task('bootstrap:talos', {}, FAST)
        expect(result.code, result.stderr).toBe(1)
        const report = cluster.report()
        expectPhase(
          report,
          'preflight',
          { 'cp-1': 'ok', 'wrkr-1': 'failed:config-invalid', 'wrkr-2': 'failed:config-invalid' },
          nodeRecovery,
        )
        expect(nodeIn(report, 'preflight', 'wrkr-1').error?.message).toMatch(
          /^machine\.network\.interfaces\.0\.interface enp9s0 in \S+e2e-wrkr-1\.yaml is not a link of the node \(its links: eth0\): .* would not be reached at 127\.238\.6\.21 after the apply$/,
        )
        expect(nodeIn(report, 'preflight', 'wrkr-1').error?.hint).toContain('talosctl get links --insecure -n 127.238.6.21')
        expect(nodeIn(report, 'preflight', 'wrkr-2').error?.message).toMatch(
          /^machine\.kubelet\.nodeIP\.validSubnets 127\.238\.99\.0\/24 in \S+ selects none of the node's addresses \(127\.238\.6\.22\): the kubelet would find no node IP$/,
        )
        for (const node of ['wrkr-1', 'wrkr-2']) expect(callsTo(cluster.calls(), node, 'apply')).toEqual([])

        editConfig(cluster.clusterDir, 'wrkr-1', /interface: enp9s0/, 'interface: eth0')
        const { command } = hintOf(result.stderr, 'wrkr-1')
        const recovered = await runInFreshShell(cluster, command)
        expect(recovered.code, `${command}\n${recovered.stderr}`).toBe(0)
        expect(cluster.sim.node('wrkr-1')?.stage).toBe('running')
      }),
    ROW_TIMEOUT,
  )
})
