// `node sim/cli.js up|down|calls|critical-path|add-fault` as the Taskfile runs it. Range 127.25.x.y.
import { afterAll, describe, expect, it } from 'vitest'
import { execFile, execFileSync, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { parse } from 'yaml'
import { REBOOT_FLOOR_MS } from '../../sim/index.js'

const tmp = mkdtempSync(join(tmpdir(), 'sim-cli-'))
const dir = join(tmp, '.sim')
const scenario = join(tmp, 'scenario.yaml')
writeFileSync(
  scenario,
  `cluster: { name: clitest, endpoint: https://127.25.1.10:6443, talosVersion: v1.13.9 }
speed: 600
nodes:
  - { name: cp-1, ip: 127.25.1.11, role: controlplane }
  - { name: wrkr-1, ip: 127.25.1.21, role: worker, image: disk }
faults:
  - { node: wrkr-1, on: probe, kind: refused, times: 1 }
`,
)
const cli = (...args: string[]) => spawnSync(process.execPath, ['sim/cli.js', ...args], { encoding: 'utf8', timeout: 60000 })
/** `get machinestatus --insecure` with the talosctl the daemon's .sim/bin holds (the real one) */
const probe = (ip: string) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      join(dir, 'bin', 'talosctl'),
      ['get', 'machinestatus', '--insecure', '-e', ip, '-n', ip, '-o', 'json'],
      { encoding: 'utf8', timeout: 30_000, env: { PATH: '/usr/bin:/bin', HOME: tmp } },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    )
  })
const refused = (ip: string) =>
  `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp ${ip}:50000: connect: connection refused"\n`

// exited counts even while the adopted process waits to be reaped (zombie)
const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z')
  } catch {
    return false
  }
}

afterAll(() => {
  cli('down', '--dir', dir)
  rmSync(tmp, { recursive: true, force: true })
})

describe('sim cli', () => {
  it('up writes env and a fresh cluster dir and returns with every node in maintenance', async () => {
    const r = cli('up', '--scenario', scenario, '--dir', dir)
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^simulator up: cluster "clitest", 2 nodes in maintenance/)
    const env = readFileSync(join(dir, 'env'), 'utf8')
    expect(env).toContain(`export TALOSCONFIG='${join(dir, 'cluster', 'clusterconfig', 'talosconfig')}'`)
    expect(env).toContain(`export KUBECONFIG='${join(dir, 'cluster', 'kubeconfig')}'`)
    expect(env).toContain(`export CLUSTER_DIR='${join(dir, 'cluster')}'`)
    expect(env).toContain(`export PATH='${join(dir, 'bin')}':"$PATH"`)
    // the OCI registry of simulated charts, and the trust that makes helm accept it: the system's roots and the simulator's CA
    expect(env).toMatch(/^export SIM_OCI_REGISTRY='127\.0\.0\.1:\d+'$/m)
    expect(env).toContain(`export SSL_CERT_FILE='${join(dir, 'trust.pem')}'`)
    expect(readFileSync(join(dir, 'trust.pem'), 'utf8')).toContain(readFileSync(join(dir, 'cluster', 'charts-ca.crt'), 'utf8'))
    const pulled = execFileSync(
      'bash',
      [
        '-c',
        `source ${join(dir, 'env')} && cd ${tmp} && helm show chart oci://$SIM_OCI_REGISTRY/home-operations/charts-mirror/cilium --version 1.19.4`,
      ],
      {
        encoding: 'utf8',
        env: { PATH: '/usr/bin:/bin', HOME: tmp, HELM_CACHE_HOME: join(tmp, 'hc'), HELM_CONFIG_HOME: join(tmp, 'hcfg') },
      },
    )
    expect(pulled).toMatch(/^name: cilium\n(.*\n)*version: 1\.19\.4\n/m)
    // the talosctl and helm first on that PATH are the real builds (`task tools`), not the simulator's own programs
    const versions = execFileSync('bash', ['-c', `source ${join(dir, 'env')} && talosctl version --client && helm version`], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin', HOME: tmp },
    })
    expect(versions).toMatch(/^Client:\n\tTag: +v1\.12\.11\n/)
    // helm 4 from `task tools` (the suite's helm; test/e2e/helm3.test.ts runs helm 3)
    expect(versions).toMatch(/\nversion\.BuildInfo\{Version:"v4\.3\.1",/)
    for (const tool of ['talosctl', 'helm'])
      expect(
        readFileSync(join(dir, 'bin', tool))
          .subarray(0, 4)
          .toString('latin1'),
      ).toBe('\x7fELF')
    const tc = parse(readFileSync(join(dir, 'cluster/clusterconfig/talosconfig'), 'utf8'))
    expect(tc.context).toBe('clitest')
    expect(tc.contexts.clitest.endpoints).toEqual([])
    expect(tc.contexts.clitest.nodes).toBeUndefined()
    expect(Buffer.from(tc.contexts.clitest.ca, 'base64').toString()).toMatch(/^-----BEGIN CERTIFICATE-----/)
    const tal = parse(readFileSync(join(dir, 'cluster/talconfig.yaml'), 'utf8'))
    expect(tal).toMatchObject({
      clusterName: 'clitest',
      endpoint: 'https://127.25.1.10:6443',
      nodes: [
        { hostname: 'cp-1', ipAddress: '127.25.1.11', controlPlane: true, installDisk: '/dev/sda' },
        { hostname: 'wrkr-1', controlPlane: false },
      ],
    })
    const cp = parse(readFileSync(join(dir, 'cluster/clusterconfig/clitest-cp-1.yaml'), 'utf8'))
    const w = parse(readFileSync(join(dir, 'cluster/clusterconfig/clitest-wrkr-1.yaml'), 'utf8'))
    expect(cp).toMatchObject({
      version: 'v1alpha1',
      machine: {
        type: 'controlplane',
        network: { hostname: 'cp-1' },
        install: { disk: '/dev/sda', image: 'ghcr.io/siderolabs/installer:v1.13.9' },
      },
      cluster: { clusterName: 'clitest', controlPlane: { endpoint: 'https://127.25.1.10:6443' }, network: { cni: { name: 'none' } } },
    })
    expect(Buffer.from(cp.machine.ca.key, 'base64').toString()).toMatch(/PRIVATE KEY/)
    expect(Buffer.from(cp.cluster.etcd.ca.crt, 'base64').toString()).toMatch(/BEGIN CERTIFICATE/)
    expect(w.machine.ca.key).toBeUndefined() // workers carry no CA keys
    expect(w.cluster.ca.key).toBe('')
    expect(w.cluster.etcd).toBeUndefined()
    expect(statSync(join(dir, 'cluster/clusterconfig/talosconfig')).mode & 0o777).toBe(0o600)
    const settings = parse(readFileSync(join(dir, 'cluster/bootstrap.yaml'), 'utf8'))
    expect(settings).toMatchObject({
      pollInterval: '200ms',
      retryDelay: '50ms',
      callTimeout: '30s',
      verifyTimeout: '1m',
      cni: {
        chart: 'cilium',
        repo: expect.stringMatching(/^https:\/\/127\.0\.0\.1:\d+\/$/),
        caFile: 'charts-ca.crt',
        version: '1.18.4',
        release: 'cilium',
        namespace: 'kube-system',
        daemonset: 'cilium',
      },
      flux: {
        mode: 'bootstrap',
        kustomization: 'flux-system/flux-system',
        git: { url: 'ssh://git@127.0.0.1/fleet.git', branch: 'main', path: 'clusters/clitest', privateKeyFile: 'flux-deploy-key' },
      },
    })
    expect(readFileSync(join(dir, 'cluster/flux-deploy-key'), 'utf8')).toMatch(/^-----BEGIN OPENSSH PRIVATE KEY-----\n/)
    expect(readFileSync(join(dir, 'cluster/charts-ca.crt'), 'utf8')).toMatch(/^-----BEGIN CERTIFICATE-----\n/)
    // the daemon serves: first probe of wrkr-1 is refused by the fault (counted), the second answers
    // the refusal is the listing's (type resolution went through): talosctl get lists it among the errors
    expect(await probe('127.25.1.21')).toMatchObject({ code: 1, stderr: `1 error occurred:\n\t* ${refused('127.25.1.21')}\n\n` })
    const ok = await probe('127.25.1.21')
    expect(JSON.parse(ok.stdout).spec.stage).toBe('maintenance')
    // talosctl's own calls (type resolution) carry their `purpose`: the command's calls are the rest
    const calls = cli('calls', '--dir', dir)
      .stdout.trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((x) => !x.purpose)
    expect(calls.map((x) => [x.node, x.tool, x.call, x.command, x.outcome.slice(0, 6)])).toEqual([
      ['wrkr-1', 'talosctl', 'probe', 'get', 'error:'],
      ['wrkr-1', 'talosctl', 'probe', 'get', 'ok'],
    ])
    expect(calls[1].args).toEqual(['machinestatuses', '--insecure', '-e', '127.25.1.21', '-n', '127.25.1.21'])
    const status = cli('status', '--dir', dir)
      .stdout.trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(status.map((n) => [n.name, n.stage])).toEqual([
      ['cp-1', 'maintenance'],
      ['wrkr-1', 'maintenance'],
    ])
    // cp-1 boots from the ISO: install, its reboot, boot, etcd, kubelet, cni; the reboot keeps the node
    // down max(40 s simulated, REBOOT_FLOOR_MS of wall clock): at speed 600 the floor (sim/node.js afterDown)
    const reboot = Math.max(40 / 600, REBOOT_FLOOR_MS / 1000)
    expect(cli('critical-path', '--dir', dir).stdout.trim()).toBe(((120 + 30 + 20 + 15 + 20) / 600 + reboot).toFixed(3))
    // the scenario file alone gives the same figure (no daemon asked)
    expect(cli('critical-path', '--scenario', scenario).stdout.trim()).toBe(((120 + 30 + 20 + 15 + 20) / 600 + reboot).toFixed(3))
  })

  it('a second up replaces the first: new daemon, cluster dir rewritten whole, calls reset', () => {
    const pid1 = readFileSync(join(dir, 'sim.pid'), 'utf8').trim()
    writeFileSync(join(dir, 'cluster', 'leftover'), 'x')
    const r = cli('up', '--scenario', scenario, '--dir', dir, '--speed', '1200')
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/stopped the previous simulator/)
    expect(readFileSync(join(dir, 'sim.pid'), 'utf8').trim()).not.toBe(pid1)
    expect(existsSync(join(dir, 'cluster', 'leftover'))).toBe(false)
    expect(readFileSync(join(dir, 'calls.jsonl'), 'utf8')).toBe('')
    expect(alive(Number(pid1))).toBe(false)
  })

  it('add-fault starts a fault in the running simulator (the counterpart of clear-fault); a bad one exits 2', async () => {
    expect((await probe('127.25.1.11')).code).toBe(0)
    const r = cli('add-fault', '--node', 'cp-1', '--kind', 'refused', '--on', 'probe', '--times', '1', '--dir', dir)
    expect(r.status, r.stderr).toBe(0)
    expect(await probe('127.25.1.11')).toMatchObject({ code: 1, stderr: `1 error occurred:\n\t* ${refused('127.25.1.11')}\n\n` })
    expect((await probe('127.25.1.11')).code).toBe(0) // times: 1 used up
    const bad = cli('add-fault', '--node', 'cp-1', '--kind', 'crash', '--on', 'probe', '--dir', dir)
    expect(bad.status).toBe(2)
    expect(bad.stderr).toMatch(/fault: on: "probe" is not valid for a crash fault/)
    expect(cli('add-fault', '--node', 'cp-1', '--kind', 'refused', '--times', 'x', '--dir', dir).status).toBe(2)
  })

  it('add-fault takes the fields of its kind, checked as a scenario fault is; task sim:fault passes them on', () => {
    const ok = cli('add-fault', '--kind', 'static-pod', '--pod', 'kube-scheduler', '--restarts', '--message', 'exit status 1', '--dir', dir)
    expect(ok.status, ok.stderr).toBe(0)
    expect(cli('clear-fault', '--kind', 'static-pod', '--dir', dir).status).toBe(0)
    for (const [args, error] of [
      [['--kind', 'static-pod'], 'fault: pod: undefined must be one of kube-apiserver, kube-controller-manager, kube-scheduler'],
      [['--node', 'wrkr-1', '--kind', 'static-pod', '--pod', 'kube-scheduler'], 'fault: node: "wrkr-1" runs no control plane static pods'],
      [['--node', 'wrkr-1', '--kind', 'etcd-crash'], 'fault: node: "wrkr-1" runs no etcd (an etcd-crash fault names a control plane)'],
      [['--kind', 'etcd-crash'], 'fault: node: an etcd-crash fault needs a node'],
      [['--node', 'cp-1', '--kind', 'refused', '--pod', 'kube-scheduler'], 'fault: pod: only static-pod faults take pod'],
      [['--node', 'cp-9', '--kind', 'refused'], 'fault: node: "cp-9" is not a node of this scenario'],
      [['--kind', 'node-ip', '--node', 'wrkr-1'], 'fault: address: must be a non-empty string'],
      [['--kind', 'latency', '--node', 'cp-1', '--on', 'kube', '--ms', 'x'], 'fault: ms: must be a number >= 0, got null'],
    ] as const) {
      const bad = cli('add-fault', ...args, '--dir', dir)
      expect([bad.status, bad.stderr], args.join(' ')).toEqual([2, expect.stringContaining(error)])
    }
    // the Taskfile's line: every field, and no --node when NODE is not given (npx puts NODE, node's path, in the environment)
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE'))
    const dry = spawnSync(
      'task',
      [
        '--verbose',
        '--dry',
        'sim:fault',
        'KIND=static-pod',
        'POD=kube-scheduler',
        'RESTARTS=true',
        'IMAGE=registry.k8s.io/kube-scheduler:v1.35.0',
        "MESSAGE=it's down",
      ],
      { encoding: 'utf8', env },
    )
    expect(dry.stderr).toMatch(
      /node sim\/cli\.js add-fault --kind static-pod --pod kube-scheduler --restarts --image registry\.k8s\.io\/kube-scheduler:v1\.35\.0 --message "it's down" --dir \.sim/,
    )
    const clear = spawnSync('task', ['--verbose', '--dry', 'sim:clear-fault', 'KIND=unreachable', 'NODE=wrkr-1'], { encoding: 'utf8', env })
    expect(clear.stderr).toMatch(/node sim\/cli\.js clear-fault --node wrkr-1 --kind unreachable --dir \.sim/)
  })

  it('down stops it and is fine when nothing runs', async () => {
    const pid = Number(readFileSync(join(dir, 'sim.pid'), 'utf8'))
    expect(cli('down', '--dir', dir).stdout).toBe('simulator stopped\n')
    expect(alive(pid)).toBe(false)
    expect((await probe('127.25.1.11')).stderr).toBe(refused('127.25.1.11'))
    const again = cli('down', '--dir', dir)
    expect([again.status, again.stdout]).toEqual([0, 'simulator not running\n'])
  })

  it('without the real talosctl and helm (no .tools/bin, none on PATH) up exits 3 naming `task tools`; nothing starts', () => {
    // a copy of sim/ with no .tools next to it, run with a PATH that holds only node
    const bare = join(tmp, 'bare')
    cpSync('sim', join(bare, 'sim'), { recursive: true })
    symlinkSync(resolve('node_modules'), join(bare, 'node_modules'))
    writeFileSync(join(bare, 'package.json'), readFileSync('package.json'))
    const r = spawnSync(process.execPath, [join(bare, 'sim', 'cli.js'), 'up', '--scenario', scenario, '--dir', join(tmp, 'bare-dir')], {
      encoding: 'utf8',
      timeout: 60000,
      env: { PATH: dirname(process.execPath), HOME: tmp },
    })
    expect(r.status).toBe(3)
    expect(r.stderr).toBe(
      'simulator not started: talosctl and helm not found: the simulator needs the real talosctl (v1.12.x) and helm (v3 or v4) ' +
        '(fix: run `task tools`, which puts them into .tools/bin, or put them on PATH)\n',
    )
    expect(existsSync(join(tmp, 'bare-dir', 'sim.pid'))).toBe(false)
  })

  it('an invalid scenario exits 2 naming the field; nothing starts', () => {
    const bad = join(tmp, 'bad.yaml')
    writeFileSync(bad, readFileSync(scenario, 'utf8').replace('127.25.1.21', '192.168.0.21'))
    const r = cli('up', '--scenario', bad, '--dir', join(tmp, 'bad-dir'))
    expect(r.status).toBe(2)
    expect(r.stderr).toBe(`${bad}:5: nodes[1].ip: "192.168.0.21" is not in 127.0.0.0/8\n`)
    expect(existsSync(join(tmp, 'bad-dir', 'sim.pid'))).toBe(false)
    expect(cli('frobnicate').status).toBe(2)
  })
})
