// Issue 15: real operators' talhelper repositories load unchanged. The fixtures in
// test/fixtures/talhelper reproduce the shapes of public home-ops repositories (talhelper v3 input and
// its generated configs, addresses rewritten to 127.97.3-5.x); talhelper's rules follow its source:
// pkg/substitute/envsubst.go (a8m/envsubst with noUnset, noEmpty), cmd/genconfig.go (talenv files),
// pkg/config/validator.go (hostnames, addresses), pkg/config/outputfilename.go (filenameTmpl).
import { execFileSync } from 'node:child_process'
import { chmodSync, cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { canonicalAddress, loadInventory, selectNodes } from '../../lib/input/inventory.js'
import { loadSettings } from '../../lib/input/settings.js'
import { parseDotenv, renderFilename, substituteEnv } from '../../lib/input/talhelper.js'
import { goBin } from '../support/go-bin.js'
import { clusterDir, inputErrors, threeNodes } from './fixtures.js'

const FIXTURES = resolve(import.meta.dirname, '../fixtures/talhelper')
const HOME_ENV = { PATH: process.env.PATH ?? '', CLUSTER_DOMAIN: 'home.example', NODE3_IP: '127.97.3.13' }

function lineOf(file: string, text: string): number {
  return (
    readFileSync(file, 'utf8')
      .split('\n')
      .findIndex((l) => l.includes(text)) + 1
  )
}

/** a fixture copied to a temporary directory, so a case can change it */
function copy(name: string): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'tb-talhelper-')), name)
  cpSync(join(FIXTURES, name), dir, { recursive: true })
  return dir
}

describe('a home-ops repository as talhelper reads it', () => {
  const dir = join(FIXTURES, 'home-ops')

  it('substitutes ${VAR} from talenv.yaml and the environment, accepts FQDN hostnames, defaults controlPlane to false', () => {
    const inv = loadInventory(dir, { env: HOME_ENV })
    expect(inv.clusterName).toBe('home')
    expect(inv.talosVersion).toBe('v1.12.11')
    expect(inv.endpoint).toBe('https://k8s.home.example:6443')
    // a DNS endpoint is not a node address: the tool treats it as the VIP
    expect(inv.vip).toBe('k8s.home.example')
    expect(inv.nodes.map((n) => [n.name, n.address, n.role])).toEqual([
      ['knode01.home.example', '127.97.3.11', 'controlplane'],
      ['knode02.home.example', '127.97.3.12', 'controlplane'],
      ['knode03.home.example', '127.97.3.13', 'worker'],
    ])
    expect(inv.nodes[1]?.addresses).toEqual(['127.97.3.12', '127.97.3.112'])
    // talhelper's file name: <clusterName>-<hostname>.yaml
    expect(inv.nodes.map((n) => n.configFile)).toEqual(
      ['knode01', 'knode02', 'knode03'].map((h) => join(dir, 'clusterconfig', `home-${h}.home.example.yaml`)),
    )
    // Talos registers an FQDN hostname in Kubernetes by its first label
    expect(inv.nodes.map((n) => n.kubeName)).toEqual(['knode01', 'knode02', 'knode03'])
    expect(inv.nodes[0]?.installDiskSelector).toEqual({ wwid: 'naa.5000c500a1b2c3d4' })
    expect(inv.nodes[1]?.installDiskSelector).toEqual({ model: 'Samsung SSD 870*' })
    expect(inv.nodes[2]?.installDisk).toBe('/dev/nvme0n1')
  })

  it('the environment alone is not enough where talenv.yaml names the value: talenv.yaml wins, as in talhelper', () => {
    const inv = loadInventory(dir, { env: { ...HOME_ENV, NODE1_IP: '127.97.3.99' } })
    expect(inv.nodes[0]?.address).toBe('127.97.3.11')
  })

  it('an unset variable is exit 2 naming it and its line', () => {
    const env = { PATH: HOME_ENV.PATH, CLUSTER_DOMAIN: 'home.example' }
    const file = join(dir, 'talconfig.yaml')
    expect(inputErrors(() => loadInventory(dir, { env }))).toEqual([
      `${file}:${lineOf(file, 'ipAddress: $NODE3_IP')}: variable \${NODE3_IP} not set (fix: export it or set it in talenv.yaml beside talconfig.yaml (KEY: value), as for talhelper genconfig; write $$ for a literal $)`,
    ])
  })

  it('a variable set but empty is refused, as talhelper refuses it', () => {
    const messages = inputErrors(() => loadInventory(dir, { env: { ...HOME_ENV, NODE3_IP: '' } }))
    expect(messages[0]).toContain(
      `talconfig.yaml:${lineOf(join(dir, 'talconfig.yaml'), 'ipAddress: $NODE3_IP')}: variable \${NODE3_IP} set but empty (fix:`,
    )
  })

  it('NODES takes the full name, the short name when unique, or any address of the node', () => {
    const inv = loadInventory(dir, { env: HOME_ENV })
    expect(selectNodes(inv, 'knode01.home.example').map((n) => n.name)).toEqual(['knode01.home.example'])
    expect(selectNodes(inv, 'knode02,knode03').map((n) => n.name)).toEqual(['knode02.home.example', 'knode03.home.example'])
    expect(selectNodes(inv, '127.97.3.112').map((n) => n.name)).toEqual(['knode02.home.example'])
    expect(selectNodes(inv, '::ffff:127.97.3.13').map((n) => n.name)).toEqual(['knode03.home.example'])
  })

  it('a short name two FQDNs share is ambiguous: exit 2 asking for the full name', () => {
    const copyDir = copy('home-ops')
    const talconfig = join(copyDir, 'talconfig.yaml')
    // knode03's config under the new node's name, with the new node's hostname (issue 27: a config
    // naming another host is refused)
    writeFileSync(
      join(copyDir, 'clusterconfig', 'home-knode01.lab.example.yaml'),
      readFileSync(join(copyDir, 'clusterconfig', 'home-knode03.home.example.yaml'), 'utf8').replace(
        'hostname: knode03.home.example',
        'hostname: knode01.lab.example',
      ),
    )
    writeFileSync(
      talconfig,
      readFileSync(talconfig, 'utf8').replace(
        '\npatches:\n',
        '  - hostname: knode01.lab.example\n    ipAddress: 127.97.3.14\n    installDisk: /dev/nvme0n1\n\npatches:\n',
      ),
    )
    const inv = loadInventory(copyDir, { env: HOME_ENV })
    expect(inputErrors(() => selectNodes(inv, 'knode01'))[0]).toMatch(
      /NODES entry "knode01" matches several nodes: knode01\.home\.example, knode01\.lab\.example \(fix: write the full name/,
    )
  })
})

describe('another config file (-c), output folder (-o) and filenameTmpl', () => {
  const dir = join(FIXTURES, 'custom-paths')

  it('reads the talconfig and the folder named by the settings, names files by node and group templates', () => {
    const settings = loadSettings({ clusterDir: dir, env: {}, flags: {} })
    expect([settings.talconfig, settings.talhelperOutDir]).toEqual(['talos/cluster.yaml', 'talos/generated'])
    const inv = loadInventory(dir, { env: {}, talconfig: 'talos/cluster.yaml', talhelperOutDir: 'talos/generated' })
    expect(inv.source).toBe(join(dir, 'talos', 'cluster.yaml'))
    expect(inv.talosconfig).toBe(join(dir, 'talos', 'generated', 'talosconfig'))
    expect(inv.talosVersion).toBe('v1.12.11')
    expect(inv.nodes.map((n) => [n.name, n.address, n.role, n.configFile])).toEqual([
      ['LabCP1', '127.97.4.11', 'controlplane', join(dir, 'talos', 'generated', 'lab_LabCP1.yaml')],
      ['lab-w1', 'lab-w1.lab.example', 'worker', join(dir, 'talos', 'generated', 'worker-lab-w1.yaml')],
      ['lab-w2', '127.97.4.22', 'worker', join(dir, 'talos', 'generated', 'worker-lab-w2.yaml')],
    ])
    expect(inv.nodes[0]?.kubeName).toBe('labcp1')
    expect(inv.vip).toBeUndefined()
  })

  it('a talconfig named in the settings that does not exist is exit 2, not a fallback', () => {
    expect(inputErrors(() => loadInventory(dir, { env: {}, talconfig: 'talos/missing.yaml' }))[0]).toMatch(
      /talos\/missing\.yaml: the talconfig file set in the settings does not exist \(fix:/,
    )
  })

  it('without the output folder setting the configs are looked for in clusterconfig/ and named', () => {
    expect(inputErrors(() => loadInventory(dir, { env: {}, talconfig: 'talos/cluster.yaml' }))[0]).toMatch(
      /cluster\.yaml:6: LabCP1: machine config .*clusterconfig\/lab_LabCP1\.yaml not found \(fix: .*talhelperOutDir/,
    )
  })
})

describe('talenv.sops.yaml', () => {
  it('without sops on PATH: exit 2 saying sops is needed; the ciphertext is never a value', () => {
    const dir = join(FIXTURES, 'sops')
    const messages = inputErrors(() => loadInventory(dir, { env: { PATH: '/nonexistent' } }))
    expect(messages).toEqual([
      `${join(dir, 'talenv.sops.yaml')}: the env file is encrypted with SOPS and sops is needed to read it ("sops" not found) (fix: install sops (or point SOPS at it) with the key that decrypts this file, or export its variables and remove the file)`,
    ])
  })

  it('with sops: its plaintext is what is substituted', () => {
    const dir = copy('sops')
    const bin = mkdtempSync(join(tmpdir(), 'tb-sops-'))
    // a stand-in for sops that prints what the real one would decrypt (the fixture holds no real key)
    writeFileSync(join(bin, 'sops'), `#!/bin/sh\n[ "$1" = --decrypt ] || exit 9\necho 'S1_IP: 127.97.5.11'\n`)
    chmodSync(join(bin, 'sops'), 0o755)
    const inv = loadInventory(dir, { env: { PATH: `${bin}:/usr/bin:/bin` } })
    expect(inv.nodes.map((n) => [n.name, n.address])).toEqual([['s1', '127.97.5.11']])
    expect(inv.endpoint).toBe('https://127.97.5.10:6443')
  })

  it('sops that cannot decrypt: exit 2 with its message', () => {
    const dir = copy('sops')
    const bin = mkdtempSync(join(tmpdir(), 'tb-sops-'))
    writeFileSync(join(bin, 'sops'), `#!/bin/sh\necho 'Failed to get the data key required to decrypt the SOPS file.' >&2\nexit 128\n`)
    chmodSync(join(bin, 'sops'), 0o755)
    expect(inputErrors(() => loadInventory(dir, { env: { PATH: `${bin}:/usr/bin:/bin` } }))[0]).toMatch(
      /talenv\.sops\.yaml: sops could not decrypt the env file: Failed to get the data key/,
    )
  })

  it('the real sops without its key file: the message names the key file it could not open', () => {
    const dir = copy('sops')
    const go = goBin()
    const keys = mkdtempSync(join(tmpdir(), 'tb-age-'))
    execFileSync(join(go, 'age-keygen'), ['-o', join(keys, 'key.txt')], { stdio: 'ignore' })
    const recipient = /public key: (\S+)/.exec(readFileSync(join(keys, 'key.txt'), 'utf8'))?.[1] ?? ''
    const plain = join(keys, 'talenv.yaml')
    writeFileSync(plain, 'S1_IP: 127.97.5.11\n')
    const encrypted = execFileSync(join(go, 'sops'), ['--encrypt', '--age', recipient, plain], { encoding: 'utf8' })
    writeFileSync(join(dir, 'talenv.sops.yaml'), encrypted)
    const env = { PATH: `${go}:/usr/bin:/bin`, SOPS_AGE_KEY_FILE: join(keys, 'missing.txt'), HOME: keys }
    expect(inputErrors(() => loadInventory(dir, { env }))[0]).toContain(`open ${join(keys, 'missing.txt')}: no such file or directory`)
  })
})

describe('talhelper substitution (a8m/envsubst, noUnset + noEmpty)', () => {
  const vars = new Map([
    ['A', 'a'],
    ['EMPTY', ''],
    ['B_2', 'b'],
  ])
  const sub = (text: string) => substituteEnv(text, vars)

  it('${VAR} and $VAR; $$ is a literal $; a lone $ stays', () => {
    expect(sub('x: ${A}-$B_2 $$A cost $ 5 $-\n')).toEqual({ text: 'x: a-b $A cost $ 5 $-\n', errors: [] })
  })

  it('defaults and alternatives', () => {
    expect(sub('${UNSET:-d} ${EMPTY:-d} ${A:-d} ${UNSET-d} ${A+alt} ${UNSET+alt} ${UNSET:=$A}').text).toBe('d d a d alt  a')
  })

  it('unset and empty variables are errors with their line; comments are not substituted', () => {
    const result = sub('# ${IN_COMMENT}\na: 1 # $ALSO_COMMENT\nb: ${MISSING}\nc: "${EMPTY}"\nd: "# ${QUOTED}"\n')
    expect(result.errors).toEqual([
      { message: 'variable ${MISSING} not set', line: 3 },
      { message: 'variable ${EMPTY} set but empty', line: 4 },
      { message: 'variable ${QUOTED} not set', line: 5 },
    ])
  })

  it('an unclosed ${ is an error', () => {
    expect(sub('a: ${A\n').errors).toEqual([{ message: 'closing brace expected', line: 1 }])
  })
})

describe('talenv files (godotenv)', () => {
  it('reads KEY: value and KEY=value, quotes, export, comments, $VAR of earlier keys', () => {
    const parsed = parseDotenv('# c\nA: one\nexport B=two # note\nC: "x\\ny $A"\nD: \'$A\'\nE: ${B}-z\n')
    expect('vars' in parsed && Object.fromEntries(parsed.vars)).toEqual({ A: 'one', B: 'two', C: 'x\ny one', D: '$A', E: 'two-z' })
  })

  it('a line godotenv cannot read fails the file, with its line', () => {
    expect(parseDotenv('A: 1\n- item\n')).toEqual({ error: 'unexpected character "-" in variable name', line: 2 })
  })
})

describe('filenameTmpl (Go text/template fields)', () => {
  const data = { ClusterName: 'c', Hostname: 'h.example', IPAddress: '127.97.3.1', Role: 'worker' as const }
  it('evaluates the fields, trim markers and comments', () => {
    expect(renderFilename('{{ .ClusterName }}-{{ .Hostname }}.yaml', data)).toEqual({ name: 'c-h.example.yaml' })
    expect(renderFilename('{{.Role}} -  {{- .IPAddress -}}  .yaml{{/* x */}}', data)).toEqual({ name: 'worker -127.97.3.1.yaml' })
  })
  it('refuses what it cannot evaluate', () => {
    expect(renderFilename('{{ .Hostname | upper }}.yaml', data)).toEqual({
      error: 'filenameTmpl action {{ .Hostname | upper }} is not one this tool evaluates (.ClusterName, .Hostname, .IPAddress, .Role)',
    })
  })
})

describe('one spelling per address', () => {
  it('IPv4-mapped IPv6, compressed and expanded IPv6, upper and lower case, DNS names', () => {
    expect(canonicalAddress('::ffff:127.97.3.1')).toBe('127.97.3.1')
    expect(canonicalAddress('0:0:0:0:0:ffff:7f61:301')).toBe('127.97.3.1')
    expect(canonicalAddress('::FFFF:7F61:301')).toBe('127.97.3.1')
    expect(canonicalAddress('0:0:0:0:0:0:0:1')).toBe(canonicalAddress('::1'))
    expect(canonicalAddress('[0000::0001]')).toBe('::1')
    expect(canonicalAddress('Node.Example.')).toBe('node.example')
  })
})

describe('machine config documents', () => {
  const withWorkerConfig = (text: string): string => {
    const dir = clusterDir(threeNodes)
    writeFileSync(join(dir, 'clusterconfig', 'demo-wrkr-1.yaml'), text)
    return dir
  }
  const V1 = 'version: v1alpha1\nmachine:\n  type: worker\n  install:\n    disk: /dev/sda\n'

  it('a stray --- (an empty document) is no document; a second v1alpha1 document or a scalar is refused', () => {
    expect(loadInventory(withWorkerConfig(`---\n${V1}---\n---\n`), { env: {} }).nodes).toHaveLength(3)
    expect(inputErrors(() => loadInventory(withWorkerConfig(`${V1}---\n${V1}`), { env: {} }))[0]).toMatch(
      /demo-wrkr-1\.yaml:7: the machine config of wrkr-1 has 2 v1alpha1 documents \(fix: regenerate/,
    )
    expect(inputErrors(() => loadInventory(withWorkerConfig('hello\n'), { env: {} }))[0]).toMatch(
      /demo-wrkr-1\.yaml:1: the machine config of wrkr-1 holds the scalar "hello" where a Talos config document belongs/,
    )
  })

  it('the Kubernetes node name: the config hostname (v1alpha1 or HostnameConfig) first label, or all of it with registerWithFQDN', () => {
    const hostnameDoc = loadInventory(
      withWorkerConfig(`${V1}---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: WRKR-1.lab.example\n`),
      { env: {} },
    )
    // the first label, lower case: the inventory's own name
    expect(hostnameDoc.nodes[1]?.kubeName).toBeUndefined()
    // not a DNS-1123 name (issue 27): refused, never turned into another name
    expect(
      inputErrors(() =>
        loadInventory(withWorkerConfig(`${V1}---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: Wrkr_1.lab.example\n`), {
          env: {},
        }),
      )[0],
    ).toMatch(/HostnameConfig\.hostname "Wrkr_1\.lab\.example" of wrkr-1 is not a DNS-1123 hostname/)
    const fqdn = loadInventory(
      withWorkerConfig(
        `${V1.replace('  install:', '  kubelet:\n    registerWithFQDN: true\n  network:\n    hostname: wrkr-1.lab.example\n  install:')}`,
      ),
      { env: {} },
    )
    expect(fqdn.nodes[1]?.kubeName).toBe('wrkr-1.lab.example')
    // a plain name that Talos keeps as it is needs no second name
    expect(loadInventory(withWorkerConfig(V1), { env: {} }).nodes[1]?.kubeName).toBeUndefined()
  })
})
